# trio-nsqd: a drop-in nsqd (NSQ v1.3) in Python on Trio.
#
#   docker build -t trio-nsqd .
#   docker run -p 4150:4150 -p 4151:4151 -v nsqd-data:/data trio-nsqd \
#       --broadcast-address=nsqd-1.example.internal --lookupd-tcp-address=nsqlookupd:4160
#
# Every argument after the image name is an nsqd flag (see `docker run trio-nsqd --help`);
# messages beyond --mem-queue-size and nsqd.dat live in the /data volume.
# The base is a build argument only so that an offline CI can build on a stand-in made from
# Debian's packages (scripts/image_test.py); `docker build .` uses the official image.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN groupadd --system --gid 10001 nsq \
    && useradd --system --uid 10001 --gid nsq --home-dir /data --no-create-home \
        --shell /usr/sbin/nologin nsq \
    && mkdir -p /data /etc/nsqd \
    && chown nsq:nsq /data

WORKDIR /opt/trio-nsqd
COPY pyproject.toml README.md ./
COPY protocol/ protocol/
COPY nsqd/ nsqd/
COPY nsqd_launcher.py ./
RUN pip install --no-cache-dir . \
    && rm -rf /opt/trio-nsqd/build
COPY config/nsqd.toml /etc/nsqd/nsqd.toml

USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
# TCP protocol, HTTP API, HTTPS API (only with --tls-cert and --tls-key)
EXPOSE 4150 4151 4152

HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:4151/ping', timeout=2).read() == b'OK' else 1)"]

ENTRYPOINT ["nsqd", "--data-path=/data"]
CMD []
