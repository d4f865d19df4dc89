"""Front ends: the game played by people, scripts and other frameworks.

A round turn by turn (:mod:`sage_env.interactive.play`), one role as a single-agent Gymnasium
env (:mod:`sage_env.interactive.wrappers`), and the game served to other frameworks
(``sage_env/interactive/openenv_server.py``, ``sage_env/interactive/vf_env.py``; each imports
its optional package, so nothing imports them but by name), and a scripted chat endpoint on
loopback to try those without a model server (:mod:`sage_env.interactive.loopback`).
"""
