"""`sage-env play --protocol azr`: each mode's observation is on screen before input is read."""

import io
import sys

import pytest

from learners.cli import main

PROPOSER = {
    "deduction": "whose OUTPUT is hard but possible to deduce",
    "abduction": "hard but possible to find an INPUT",
    "induction": "Write 10 different inputs",
}
SOLVER = {
    "deduction": ("Deduce the output of this Python function", "```output"),
    "abduction": ("Find an input for which this Python function returns", "```input"),
    "induction": ("Deduce the Python function that maps these inputs", "```python"),
}
REPLIES = {
    "deduction": ["def f(a):\n    return a + 1\n```\n```input\n3\n```", "4\n```"],
    "abduction": ["def f(a):\n    return a + 1\n```\n```input\n3\n```", "3\n```"],
    "induction": ["1\n```\n```input\n2\n```\n```message\na hint\n```", "def f(a):\n    return a\n```"],
}


class Typist:
    """Scripted stdin that records what was on screen when each reply began to be read."""

    def __init__(self, replies, screen):
        self.lines = [ln + "\n" for r in replies for ln in (r.split("\n") + ["."])]
        self.screen = screen
        self.at_start = True
        self.seen = []

    def isatty(self):
        return False

    def __iter__(self):
        return self

    def __next__(self):
        if not self.lines:
            raise StopIteration
        if self.at_start:
            self.seen.append(self.screen.getvalue())
        line = self.lines.pop(0)
        self.at_start = line == ".\n"
        return line


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["deduction", "abduction", "induction"])
def test_play_azr_shows_each_modes_observation_before_reading_input(mode, monkeypatch):
    screen = io.StringIO()
    typist = Typist(REPLIES[mode], screen)
    monkeypatch.setattr(sys, "stdout", screen)
    monkeypatch.setattr(sys, "stdin", typist)
    code = main(
        [
            "play",
            "--protocol",
            "azr",
            "--players",
            "proposer=human,solver=human",
            "--env.solver-samples",
            "1",
            "--env.protocol-config.modes",
            mode,
        ]
    )
    assert code == 0
    assert len(typist.seen) == 2  # one reply each: proposer, then solver
    before_proposer, before_solver = typist.seen
    # the proposer's observation, its mode's prompt and its prefix, then nothing read yet
    assert "proposer_0 [propose]" in before_proposer and PROPOSER[mode] in before_proposer
    assert "[solve]" not in before_proposer
    # induction's prefix holds its program's first input and opens the second block
    assert before_proposer.rstrip().endswith("```python" if mode != "induction" else "```input 2")
    if mode == "induction":
        assert "```input 1\n" in before_proposer[before_proposer.rindex("your reply") :]
    # the solver's observation of the same mode is complete before its reply is read
    solver_part = before_solver[before_solver.rindex("solver_0 [solve]") :]
    question, prefix = SOLVER[mode]
    assert question in solver_part
    assert solver_part.rstrip().endswith(prefix)
    assert "--- your reply" in solver_part
