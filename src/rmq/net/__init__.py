"""Remoting: the frame codec, the epoll event loop and server, the remoting client.

    from rmq.net import RemotingClient, RemotingCommand, RemotingServer

The codes that requests and responses carry are ``rmq.protocol.codes``'.
"""

from rmq.net.channel import Channel
from rmq.net.client import RemotingClient
from rmq.net.codec import FrameDecoder, RemotingCommand
from rmq.net.loop import EventLoop
from rmq.net.server import RemotingServer

__all__ = [
    "Channel",
    "EventLoop",
    "FrameDecoder",
    "RemotingClient",
    "RemotingCommand",
    "RemotingServer",
]
