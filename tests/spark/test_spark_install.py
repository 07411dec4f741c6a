"""format("nsq") is found from a regular (`pip install .`) and an editable (`pip install -e .`)
install, with the job started outside the checkout (cwd /tmp-like, no PYTHONPATH).

Spark finds Python data sources by scanning sys.path with pkgutil.iter_modules() for
`pyspark_*` modules with a `DefaultSource` (pyspark/sql/worker/lookup_data_sources.py), which
cannot see setuptools' editable import hook; pyproject.toml's `package-dir` makes an editable
install a plain path entry instead. Each case (the two side by side) copies the project's
sources to a temporary folder, installs them into a fresh virtualenv (which sees the test
environment's site-packages, for pyspark and pyarrow), and runs a real job with that
interpreter (driver and workers) from another folder.
The build runs in pip's isolated build environment, with the build backend pyproject.toml asks
for fetched from the package index, as a user's `pip install` does: nothing depends on which
setuptools or wheel the machine's Python happens to have (building without isolation failed
with `invalid command 'bdist_wheel'` where `wheel` was missing)."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from spark_support import REPO_ROOT, SPARK_CONF, Proc, drain, with_jvm_options

SOURCES = ("pyproject.toml", "README.md", "nsqd_launcher.py", "nsqd", "protocol", "pyspark_nsq")

JOB = """
import json, os, sys
from pyspark.sql import SparkSession

tcp, topic = sys.argv[1:3]
builder = SparkSession.builder.master("local[1]").appName("nsq-install")
for key, value in json.loads(os.environ["NSQ_TEST_CONF"]).items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
df = spark.createDataFrame([(f"installed-{i}",) for i in range(3)], "body string")
df.write.format("nsq").option("nsqd", tcp).option("topic", topic).mode("append").save()
import pyspark_nsq
print(json.dumps({"module": pyspark_nsq.__file__}))
spark.stop()
"""


def _copy_sources(dest: Path) -> Path:
    dest.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCES:
        src = REPO_ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)
    return dest


def _venv_with(tmp: Path, project: Path, editable: bool) -> Path:
    """A fresh virtualenv holding the project, installed as a user would: pip builds it in
    an isolated environment with the backend from pyproject.toml's [build-system]."""
    venv = tmp / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    _see_our_packages(python)
    target = ["-e", str(project)] if editable else [str(project)]
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
    done = subprocess.run([*pip, *target], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return python


def _see_our_packages(python: Path) -> None:
    """pyspark and pyarrow for the new virtualenv: the site-packages of the environment the
    tests run in, as plain path entries behind its own (its .pth files are not read, so the
    checkout's own install stays out). Not --system-site-packages: from a virtualenv (as
    scripts/test.sh runs in a fresh clone) that gives the base interpreter's, which lack them."""
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    ours = [*site.getsitepackages(), site.getusersitepackages()]
    Path(purelib, "tests-site-packages.pth").write_text(
        "".join(f"{path}\n" for path in dict.fromkeys(ours) if Path(path).is_dir())
    )


def _job_env(python: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK"))}
    with_jvm_options(env)  # the JIT's top tier off, as in the other tests' JVMs
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = str(python)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["NSQ_TEST_CONF"] = json.dumps(SPARK_CONF)
    return env


def _install_and_run(nsqd: Proc, topic: str, tmp: Path, editable: bool) -> tuple[Path, Path]:
    """One case: the project installed into a fresh virtualenv, the job run with it from
    another folder; the project's copy and the module the job imported."""
    tmp.mkdir()
    project = _copy_sources(tmp / "project")
    python = _venv_with(tmp, project, editable)
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "job.py").write_text(JOB)
    done = subprocess.run(
        [str(python), "job.py", nsqd.tcp, topic],
        cwd=elsewhere,
        env=_job_env(python),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return project, Path(json.loads(done.stdout.strip().splitlines()[-1])["module"])


def test_format_nsq_found_from_a_regular_and_an_editable_install(
    nsqd: Proc, topic: str, tmp_path: Path
) -> None:
    """The two cases side by side (each is mostly a build and a JVM's start)."""
    cases = {"regular": False, "editable": True}
    with ThreadPoolExecutor(2) as pool:
        runs = {
            name: pool.submit(_install_and_run, nsqd, f"{topic}_{name}", tmp_path / name, editable)
            for name, editable in cases.items()
        }
        results = {name: run.result() for name, run in runs.items()}
    project, module = results["editable"]
    assert module == project / "pyspark_nsq" / "__init__.py"  # the project's folder, no copy
    _, module = results["regular"]
    assert module.is_relative_to(tmp_path / "regular" / "venv"), module
    for name in cases:
        got = drain(nsqd.tcp, f"{topic}_{name}", "check", 3)
        assert Counter(got) == Counter(f"installed-{i}".encode() for i in range(3)), name
