"""flashcheck.check on Python kernels: a correct kernel passes, kernels broken on purpose are caught with a
minimized case, a fixture that replays, and a reproduce line that works."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import flashcheck
from attention_kernels import CONTRACT, attention, attention_scaled_twice, attention_top_left


def test_a_correct_kernel_passes(tmp_path):
    report = flashcheck.check(attention, properties=["conformance", "gqa-repeat"], cases=40, seed=3, out=tmp_path)
    assert report.passed, report.message()
    assert report.cases == 80 and "pass" in str(report)


def test_a_kernel_broken_on_purpose_is_caught_minimized_and_reproducible(tmp_path):
    with pytest.raises(flashcheck.CheckFailed) as caught:
        flashcheck.check(attention_top_left, properties="conformance", cases=200, seed=1, out=tmp_path)
    report = caught.value.report
    message = str(caught.value)
    for part in ("minimized case", "fixture:", "reproduce:", "seed 1"):
        assert part in message
    finding = report.findings[0]
    case = finding.case
    assert case["causal"] and any(s["q_len"] != s["k_len"] for s in case["seqs"])  # flash-attention#466's condition
    assert Path(finding.fixture).is_file()
    # The reproduce line, run as a user would: the package's `flashcheck` first on PATH.
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               FLASHCHECK_PYTHONPATH=str(Path(__file__).parent))
    done = subprocess.run(finding.reproduce, shell=True, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "still fail as recorded" in done.stdout


def test_a_contract_given_to_check_applies(tmp_path):
    fp32_only = dict(CONTRACT, dtypes=["fp32"])
    report = flashcheck.check(attention, properties="conformance", cases=30, seed=5, contract=fp32_only,
                              out=tmp_path / "a")
    assert report.passed
    with pytest.raises(flashcheck.CheckError, match="bf16"):
        flashcheck.check(attention, properties="conformance", cases=30, seed=5, contract=fp32_only, dtype="bf16",
                         out=tmp_path / "b")


def test_a_wrong_scale_is_caught(tmp_path):
    report = flashcheck.check(attention_scaled_twice, properties="conformance", cases=100, seed=2, out=tmp_path,
                              raise_on_failure=False)
    assert not report.passed and report.findings[0].property == "conformance"


def test_a_nested_function_is_refused_before_anything_runs():
    def local_kernel(q, k, v, out, lse, args):
        pass
    with pytest.raises(flashcheck.CheckError, match="top level"):
        flashcheck.check(local_kernel)


def test_the_engine_kernels_by_name_forward_and_backward(tmp_path):
    report = flashcheck.check("tiled-cpu", properties=["conformance", "grad-conformance"], cases=30, seed=4,
                              out=tmp_path / "a")
    assert report.passed and report.cases == 60
    with pytest.raises(flashcheck.CheckFailed, match="grad-conformance"):
        flashcheck.check("mutant-bw-dq-scaled-twice", properties="grad-conformance", cases=200, seed=4,
                         out=tmp_path / "b")
