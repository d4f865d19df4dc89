def _judge(tests):
    from sage_env.sandbox.judge import Judge

    rewritten, sites = zip(*(rewrite_asserts(t) for t in tests))
    out = []
    return Judge(list(rewritten), list(sites), lambda **ev: out.append(ev)), out


def test_judge_reads_a_test_only_from_its_own_channel():
    judge, out = _judge(["assert f(1) == 1", "assert f(2) == 4"])
    # test 0's process claims test 1 passed, and writes an exit status: neither is believed
    judge.from_worker({"ev": "chan", "i": 0, "e": {"ev": "setup_ok"}})
    for e in ({"ev": "site", "i": 1, "k": 0, "v": ["I", 4]}, {"ev": "exit", "i": 1, "status": 0}):
        judge.from_worker({"ev": "chan", "i": 0, "e": e})
    judge.from_worker({"ev": "chan", "i": 0, "e": {"ev": "test", "ok": True}})
    judge.from_worker({"ev": "exit", "i": 0, "status": 0})
    judge.from_last({"ev": "setup_ok"})
    judge.from_last({"ev": "test", "ok": True})  # never checked its literal assertion
    judge.finish(0)
    verdicts = [e for e in out if e["ev"] == "test"]
    assert [(e["i"], e["ok"]) for e in verdicts] == [(0, False), (1, False)]
    assert verdicts[0]["msg"] == "assertion 0: got 4"
    assert verdicts[1]["msg"] == "assertion 0 was never checked"
    assert out[-1] == {"ev": "done"}


def test_judge_passes_a_test_whose_process_reported_the_expected_value():
    judge, out = _judge(["assert f(1) == 1"])
    for e in ({"ev": "setup_ok"}, {"ev": "program_ok"}, {"ev": "site", "k": 0, "v": ["I", 1]}):
        judge.from_last(e)
    judge.from_last({"ev": "test", "ok": True})
    judge.finish(0)
    assert out == [{"ev": "program_ok"}, {"ev": "test", "i": 0, "ok": True}, {"ev": "done"}]


def test_judge_trusts_setup_errors_only_before_the_program_runs():
    judge, out = _judge(["assert f(1) == 1"])
    judge.from_last({"ev": "setup_ok"})
    judge.from_last({"ev": "setup_error", "exc": "ValueError", "msg": "forged"})
    judge.from_last({"ev": "program_ok"})
    judge.finish(0)
    assert {"ev": "setup_error", "exc": "ValueError", "msg": "forged"} not in out


def test_judge_fails_identical_tests_that_disagree():
    judge, out = _judge(["assert f(1) == 1", "assert f(1) == 2"])
    for i, value in ((0, 1), (1, 2)):
        events = [{"ev": "setup_ok"}, {"ev": "site", "k": 0, "v": ["I", value]}]
        events.append({"ev": "test", "ok": True})
        for e in events:
            if i == 0:
                judge.from_worker({"ev": "chan", "i": 0, "e": e})
            else:
                judge.from_last(e)
    judge.from_worker({"ev": "exit", "i": 0, "status": 0})
    judge.finish(0)
    verdicts = [e for e in out if e["ev"] == "test"]
    assert [(e["i"], e["ok"]) for e in verdicts] == [(0, False), (1, False)]
    assert "identical tests got different results" in verdicts[0]["msg"]
