"""Sample agent workflows for `rltui workflow-check`, and the loopback chat server they call.

The check loads them the way it loads a user's workflow: ``--path`` this folder and a target
such as ``agent_echo:EchoAgent``. Each module shows one way a workflow breaks under RL
concurrency (see its docstring); ``chat_server.py`` answers ``/v1/chat/completions``
deterministically from the prompt and ``fakechat.py`` is the small async client they share.
"""
