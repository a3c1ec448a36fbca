"""Timed delivery: messages due at any time (RocketMQ 5.x's timer messages; README "Timed delivery").

rmq.broker.timer.store   TimerMessageStore: accepting TIMER_* sends, the enqueue and dequeue
                         services, the checkpoint and recovery (its docstring has the rules)
rmq.broker.timer.wheel   TimerLog (units on disk) and TimerWheel (ticks over them): the layouts
"""

from rmq.broker.timer.store import TimerMessageStore

__all__ = ["TimerMessageStore"]
