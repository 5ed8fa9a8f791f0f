"""The pytest plugin, run as users run it (pytest in a subprocess, the plugin loaded from the installed package's
entry point): the flashcheck fixture with its options, and fixture files collected as tests."""
import json
import re
from pathlib import Path

KERNELS = (Path(__file__).parent / "attention_kernels.py").read_text()

FIXTURE_CASE = {"dtype": "fp32", "heads": 2, "kv_heads": 1, "head_dim": 16, "causal": True,
                "seqs": [{"q_len": 3, "k_len": 7}], "data": {"seed": 466}}


def test_the_fixture_catches_a_broken_kernel_and_prints_its_seed(pytester):
    pytester.makepyfile(attention_kernels=KERNELS)
    pytester.makepyfile(test_kernels="""
        import pytest
        from attention_kernels import attention, attention_top_left

        def test_correct(flashcheck):
            report = flashcheck.check(attention, properties="conformance", cases=500)
            print("judged", report.cases)

        @pytest.mark.flashcheck(properties=["conformance"])
        def test_broken(flashcheck):
            flashcheck.check(attention_top_left)
    """)
    result = pytester.runpytest_subprocess("--flashcheck-seed", "7", "--flashcheck-cases", "40", "-s", "-p",
                                           "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*flashcheck: seed 7*", "*judged 40*", "*CheckFailed*seed 7*", "*minimized case*",
                                 "*reproduce: flashcheck replay*"])


def test_fixture_files_are_collected_with_known_bugs_as_strict_xfails(pytester):
    pytester.makepyfile(attention_kernels=KERNELS)
    broken, correct = "py:attention_kernels:attention_top_left", "py:attention_kernels:attention"
    bug = dict(FIXTURE_CASE, name="466", expect={broken: {"verdict": "fail", "why": "top-left causal"},
                                                 correct: {"verdict": "fail", "why": "recorded wrongly on purpose"}})
    plain = dict(FIXTURE_CASE, name="not-causal", causal=False)
    Path(pytester.path, "cases.json").write_text(json.dumps({"schema": "flashcheck.fixture/1", "cases": [bug, plain]}))
    Path(pytester.path, "other.json").write_text(json.dumps({"not": "a fixture"}))
    result = pytester.runpytest_subprocess("--flashcheck-fixtures", "--flashcheck-kernel", broken,
                                           "--flashcheck-kernel", correct, "-rxXfs", "-p", "no:cacheprovider")
    # 466 x broken: the known bug reproduces (xfail); 466 x correct: it "NOW PASSES" (strict xpass, a failure);
    # the plain case passes on both.
    result.assert_outcomes(passed=2, xfailed=1, failed=1)
    out = result.stdout.str()
    assert "FAILED cases.json::466[py:attention_kernels:attention] - [XPASS(strict)]" in out
    assert "the recorded bug NOW PASSES: update the fixture" in out


def test_fixture_files_are_not_collected_unless_asked(pytester):
    Path(pytester.path, "cases.json").write_text(json.dumps({"schema": "flashcheck.fixture/1",
                                                             "cases": [FIXTURE_CASE]}))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == 5  # no tests collected


def test_committed_fixtures_run_on_engine_kernels_and_catch_a_mutant(pytester):
    fixture = Path(__file__).resolve().parents[2] / "fixtures" / "issues" / "flash-attention-466.json"
    result = pytester.runpytest_subprocess("--flashcheck-fixtures", str(fixture), "--flashcheck-kernel", "tiled-cpu",
                                           "--flashcheck-kernel", "mutant-top-left-causal", "-p", "no:cacheprovider")
    # Five cases: three pass on tiled-cpu and fail on the mutant, two are top-left, outside both contracts (skips).
    result.assert_outcomes(passed=3, failed=3, skipped=4)
    out = result.stdout.str()
    assert "[mutant-top-left-causal]" in out and "[tiled-cpu]" not in out.split("short test summary")[-1]
    assert "reproduce: flashcheck replay" in out


def test_the_flash_attn_grid_judges_cases_and_skips_what_the_contract_excludes(pytester, monkeypatch, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))  # where check_case makes a case's folder
    pytester.makepyfile(attention_kernels=KERNELS)
    pytester.makepyfile(test_grid="""
        import pytest
        import flashcheck
        from attention_kernels import attention, attention_top_left

        GRID = flashcheck.grid.fa_grid(seqlens=[(113, 203)], head_dims=[59], local=[False], mha_types=["gqa"],
                                       dtypes=["bf16", "fp16"], heads=6, batch=2)

        @pytest.mark.parametrize("case", GRID)
        def test_correct(case):
            flashcheck.grid.check_case(attention, case)

        @pytest.mark.parametrize("case", GRID)
        def test_broken(case):
            flashcheck.grid.check_case(attention_top_left, case)
    """)
    result = pytester.runpytest_subprocess("-rs", "-p", "no:cacheprovider")
    # bf16 x {causal, not}: the correct kernel passes both, the broken one fails the causal one (113 x 203 is where
    # the diagonals differ); fp16 is outside the kernels' contract: skips, not passes.
    result.assert_outcomes(passed=3, failed=1, skipped=4)
    out = result.stdout.str()
    assert "test_broken[L113x203-d59-gqa-bf16-causal]" in out and "unsupported:" in out
    # Only the failure keeps its folder, with the fixture its message names for replay.
    kept = sorted(tmp.glob("flashcheck-case-*"))
    assert len(kept) == 1, kept
    named = re.search(r"fixture: (\S+\.json)", out).group(1)
    assert Path(named).is_file() and Path(named).parent == kept[0], (named, kept)


def test_model_case_fixtures_give_one_test_per_profile_and_kernel(pytester):
    # transformers#39814's fixture family: every profile judged on tiled-cpu; the profiles that carry the bug are
    # strict xfails, the rest pass, none is skipped for want of a record.
    fixture = Path(__file__).resolve().parents[2] / "fixtures" / "issues" / "hf-F4-position-ids-without-zero.json"
    result = pytester.runpytest_subprocess("--flashcheck-fixtures", str(fixture), "--flashcheck-kernel", "tiled-cpu",
                                           "-p", "no:cacheprovider", "-v")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) > 0 and outcomes.get("xfailed", 0) > 0, outcomes
    assert "skipped" not in outcomes and "failed" not in outcomes, outcomes
    assert "[hf-4.55@tiled-cpu] XFAIL" in result.stdout.str()
