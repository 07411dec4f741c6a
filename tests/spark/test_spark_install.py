"""format("nsq") is found from a regular (`pip install .`) and an editable (`pip install -e .`)
install, with the job started outside the checkout (cwd /tmp-like, no PYTHONPATH).

Spark finds Python data sources by scanning sys.path with pkgutil.iter_modules() for
`pyspark_*` modules with a `DefaultSource` (pyspark/sql/worker/lookup_data_sources.py), which
cannot see setuptools' editable import hook; pyproject.toml's `package-dir` makes an editable
install a plain path entry instead. Each case copies the project's sources to a temporary
folder, installs them into a fresh virtualenv (--system-site-packages, for pyspark and
pyarrow), and runs a real job with that interpreter (driver and workers) from another folder.
The build runs in pip's isolated build environment, with the build backend pyproject.toml asks
for fetched from the package index, as a user's `pip install` does: nothing depends on which
setuptools or wheel the machine's Python happens to have (building without isolation failed
with `invalid command 'bdist_wheel'` where `wheel` was missing)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from spark_support import REPO_ROOT, SPARK_CONF, Proc, drain

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
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
        timeout=120,
    )
    python = venv / "bin" / "python"
    target = ["-e", str(project)] if editable else [str(project)]
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
    done = subprocess.run([*pip, *target], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return python


def _job_env(python: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK"))}
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = str(python)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["NSQ_TEST_CONF"] = json.dumps(SPARK_CONF)
    return env


@pytest.mark.parametrize("editable", [False, True], ids=["regular", "editable"])
def test_format_nsq_found_from_an_install(
    nsqd: Proc, topic: str, tmp_path: Path, editable: bool
) -> None:
    project = _copy_sources(tmp_path / "project")
    python = _venv_with(tmp_path, project, editable)
    elsewhere = tmp_path / "elsewhere"
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
    module = Path(json.loads(done.stdout.strip().splitlines()[-1])["module"])
    if editable:  # the project's own folder, not a copy in site-packages
        assert module == project / "pyspark_nsq" / "__init__.py"
    else:
        assert module.is_relative_to(tmp_path / "venv"), module
    got = drain(nsqd.tcp, topic, "check", 3)
    assert Counter(got) == Counter(f"installed-{i}".encode() for i in range(3))
