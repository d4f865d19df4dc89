"""How many tokens a verification step would yield with drafts copied from text at hand.

Issue 48 names speculative decoding with drafts from the prompt and earlier rollouts as a
route to more rollout tokens/s: one forward verifies a row's next ``k`` drafted tokens and
keeps those the model would have produced. This script replays recorded rollouts and counts,
without a model, what that buys in steps.

**The draft** (prompt lookup, as transformers' ``prompt_lookup_num_tokens``): at each step
the longest suffix of the row's context (``n`` = ``--ngram`` down to 1 tokens) that also
occurs earlier in it, most recent occurrence first, proposes the ``k`` tokens that followed
that occurrence. With ``--siblings`` the context also holds the completions of the same
role's earlier rows on the same task in the same step (the other samples of a group), after
the prompt: drafts from earlier rollouts.

**The count is exact in distribution for sampled rollouts.** Speculative sampling with a
point-mass draft accepts a drafted token ``x`` with probability ``p(x)`` and, on a rejection,
samples from ``p`` without ``x`` (Leviathan et al. 2023, arXiv 2211.17192, with ``q`` a point
mass): the tokens it emits are distributed as ``p``'s, and a recorded sample ``y`` equals the
draft with probability ``p(x)``. So walking a recorded completion, accepting drafted tokens
while they equal the recorded ones and emitting one more token per verification (the
correction or the bonus), gives the verification count that decoding this completion would
have taken. ``tokens_per_verification`` is the mean over every token of every row: the
largest factor by which drafts can cut the number of forwards (a verification forward costs
more than a one-token one: ``rows x (k + 1)`` positions instead of ``rows``).

Sources: the demo's recorded ``generate`` calls (``results/ct2_demo_calls.json``, token ids)
and, with ``--transcripts``, a training run's ``transcripts/step_*.jsonl`` (the observation
and prefix as the prompt, the reply after the prefix as the completion; tokenized with the
model's tokenizer). Writes ``benchmarks/perf/results/draft_lookup.json``.

Usage::

    python -m benchmarks.perf.draft_lookup                          # the demo's calls, seconds
    python -m benchmarks.perf.draft_lookup --transcripts RUN/transcripts --siblings
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

OUT = Path(__file__).parent / "results" / "draft_lookup.json"
CALLS = Path(__file__).parent / "results" / "ct2_demo_calls.json"


def draft(context: list[int], k: int, ngram: int) -> list[int]:
    """Up to ``k`` tokens that followed the most recent earlier occurrence of the longest
    suffix of ``context`` (``ngram`` tokens down to 1); ``[]`` where none recurs."""
    for n in range(min(ngram, len(context) - 1), 0, -1):
        tail = context[-n:]
        for start in range(len(context) - n - 1, -1, -1):
            if context[start : start + n] == tail:
                return context[start + n : start + n + k]
    return []


def replay(prompt: list[int], completion: list[int], k: int, ngram: int = 3) -> dict:
    """``{"tokens", "verifications", "drafted", "accepted"}`` of decoding ``completion``
    after ``prompt`` with drafts of up to ``k`` tokens (:func:`draft`).

    Each verification keeps the drafted tokens up to the first that differs from the
    completion, plus one token (the completion's next: the correction, or the bonus after a
    fully accepted draft), so ``tokens / verifications`` is at least 1 and at most ``k + 1``.
    """
    context = list(prompt)
    i = verifications = drafted = accepted = 0
    while i < len(completion):
        proposal = draft(context, k, ngram) if k else []
        kept = 0
        while kept < len(proposal) and i + kept < len(completion):
            if completion[i + kept] != proposal[kept]:
                break
            kept += 1
        step = min(kept + 1, len(completion) - i)
        context.extend(completion[i : i + step])
        i += step
        verifications += 1
        drafted += len(proposal)
        accepted += kept
    return {
        "tokens": len(completion),
        "verifications": verifications,
        "drafted": drafted,
        "accepted": accepted,
    }


def demo_rows() -> list[tuple[str, list[int], list[int]]]:
    """``(source, prompt, completion)`` of every row of the demo's recorded calls."""
    rows = []
    for call in json.loads(CALLS.read_text()):
        for prompt, completion in zip(call["prompts"], call["completion_ids"]):
            rows.append(("demo_calls", prompt, completion))
    return rows


def transcript_rows(
    folder: Path, tokenizer, siblings: bool
) -> list[tuple[str, list[int], list[int]]]:
    """``(role, prompt, completion)`` of every action of a run's transcripts, in order.

    With ``siblings`` a row's prompt is followed by the completions of the same role's
    earlier rows on the same task in the same step (its role then reads ``<role>+siblings``).
    """
    rows, earlier = [], {}
    for path in sorted(folder.glob("step_*.jsonl")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            record = json.loads(line)
            for action in record.get("actions", []):
                text, prefix = action.get("action"), action.get("prefix") or ""
                if not isinstance(text, str) or not text:
                    continue
                reply = text[len(prefix) :] if text.startswith(prefix) else text
                prompt = tokenizer(action.get("observation", "") + prefix)["input_ids"]
                completion = tokenizer(reply, add_special_tokens=False)["input_ids"]
                role = action.get("role", "?")
                if siblings:
                    key = (record.get("step"), action.get("task_id"), role)
                    before = earlier.setdefault(key, [])
                    prompt = prompt + [t for c in before for t in c]
                    before.append(completion)
                    role += "+siblings"
                rows.append((role, prompt, completion))
    return rows


def summarise(rows, ks: list[int], ngram: int) -> dict:
    """Per source or role (and ``all roles`` of a run) and draft length: tokens,
    verifications, tokens per verification, drafted tokens per verification and the share
    of drafted tokens accepted."""
    out: dict = {}
    for k in ks:
        for source, prompt, completion in rows:
            got = replay(prompt, completion, k, ngram)
            groups = [source]
            if source != "demo_calls":  # and the run's every role together
                groups.append("all roles+siblings" if source.endswith("+siblings") else "all roles")
            for group in groups:
                cell = out.setdefault(group, {}).setdefault(str(k), dict.fromkeys(got, 0))
                for key, value in got.items():
                    cell[key] += value
    for per_k in out.values():
        for cell in per_k.values():
            cell["tokens_per_verification"] = round(
                cell["tokens"] / max(cell["verifications"], 1), 3
            )
            cell["drafted_per_verification"] = round(
                cell["drafted"] / max(cell["verifications"], 1), 3
            )
            cell["acceptance"] = round(cell["accepted"] / max(cell["drafted"], 1), 3)
    return out


def main(argv: list[str] | None = None) -> dict:
    """Replay, print and write ``--out``; return the record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", default="2,4,8", help="draft lengths")
    parser.add_argument("--ngram", type=int, default=3, help="longest suffix matched")
    parser.add_argument("--transcripts", default=None, help="a run's transcripts/ folder")
    parser.add_argument(
        "--siblings", action="store_true", help="also draft from a group's earlier rows"
    )
    parser.add_argument(
        "--model", default="smollm2-135m-instruct", help="tokenizer of the transcripts"
    )
    parser.add_argument("--note", default="")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.k.split(",")]
    rows = demo_rows()
    if args.transcripts:
        from transformers import AutoTokenizer

        from learners.policy.loading import resolve_model

        tokenizer = AutoTokenizer.from_pretrained(resolve_model(args.model))
        folder = Path(args.transcripts)
        rows += transcript_rows(folder, tokenizer, siblings=False)
        if args.siblings:
            rows += transcript_rows(folder, tokenizer, siblings=True)
    result = {
        "by_source": summarise(rows, ks, args.ngram),
        "ngram": args.ngram,
        "transcripts": args.transcripts,
        "note": args.note,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python -m benchmarks.perf.draft_lookup " + " ".join(argv or sys.argv[1:]),
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for source, per_k in result["by_source"].items():
        print(source, {k: c["tokens_per_verification"] for k, c in per_k.items()})
    return result


if __name__ == "__main__":
    main()
