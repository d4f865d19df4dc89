"""Policy-gradient algorithms: the learner protocol and registry, advantages, losses and the
shared :class:`~learners.algorithms.pg.PolicyGradientLearner`, one module per algorithm
(``trr``, ``grpo``, ``reinforce_pp``, ``ema_baseline``), plugin checks and entry points.

Import the modules themselves (``from learners.algorithms.trr import TRRLearner``); this
package imports nothing, so ``learners.algorithms.registry`` stays free of torch.
"""
