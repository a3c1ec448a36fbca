"""Remoting: the frame codec, the epoll event loop and server, the remoting client.

    from rmq.net import RemotingCommand, RemotingServer, RemotingClient, RequestCode, ResponseCode
"""

from rmq.net.channel import Channel
from rmq.net.client import RemotingClient
from rmq.net.codec import FrameDecoder, RemotingCommand
from rmq.net.codes import RequestCode, ResponseCode
from rmq.net.loop import EventLoop
from rmq.net.server import RemotingServer

__all__ = [
    "Channel",
    "EventLoop",
    "FrameDecoder",
    "RemotingClient",
    "RemotingCommand",
    "RemotingServer",
    "RequestCode",
    "ResponseCode",
]
