"""The text of a round.

The role prompts written to the model (:mod:`sage_env.text.prompts`) and the one home of every
reader of its replies (:mod:`sage_env.text.parsing`).
"""
