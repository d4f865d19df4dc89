"""Scripted policies and tiny task sets shared by the environment tests."""

from sage_env import Task

MATH_SEED = Task(
    task_id="seed/m0", domain="math", prompt="What is 2+3?", answer="5", source="gsm8k"
)
CODE_SEED = Task(
    task_id="seed/c0",
    domain="code",
    prompt="Write inc(x) returning x + 1.",
    tests=["assert inc(1) == 2", "assert inc(-1) == 0"],
    entry_point="inc",
    source="mbpp",
)


def play_round(env, script, seed=0):
    """Play one episode; ``script(agent, phase, obs, n)`` returns the action text, where n
    counts earlier actions in the same phase. Returns ``[(agent, phase, reward, last_info)]``
    with each action's reward read at the agent's next turn (PettingZoo AEC semantics)."""
    env.reset(seed=seed)
    records, awaiting, counts = [], {}, {}
    for agent in env.agent_iter(max_iter=200):
        obs, reward, term, trunc, info = env.last()
        if agent in awaiting:
            rec = awaiting.pop(agent)
            rec[2] = reward
            rec[3] = dict(info["last"])
        if term or trunc:
            env.step(None)
            continue
        phase = info["phase"]
        n = counts.get(phase, 0)
        counts[phase] = n + 1
        rec = [agent, phase, None, None]
        records.append(rec)
        awaiting[agent] = rec
        env.step(script(agent, phase, obs, n))
    return [tuple(r) for r in records]
