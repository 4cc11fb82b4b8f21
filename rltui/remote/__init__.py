"""Reaching a job's other nodes: host lists, the command lines that start agents there (ssh,
srun, a local subprocess) and the stream that reads each agent's JSON lines (docs/multi-node.md).

hostlist and transports are pure; stream runs processes and threads.
"""
