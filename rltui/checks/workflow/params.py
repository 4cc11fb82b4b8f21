"""The workflow check's settings, each declared once (rltui.checks.params): the spec's field
and default, the ``rltui workflow-check`` flag and help, the check form's field. Imports only
rltui.checks.params: ``rltui --help`` reads it."""

from __future__ import annotations

from rltui.checks.params import FLAG, FLOAT, INT, JSON, PATHS, Form, Param

SEQUENTIAL_PROMPTS = 4

PARAMS = (
    Param("target", "workflow", metavar="MODULE:CLASS",
          help="the workflow class, e.g. my_agent.flow:MathAgent (its folder via --path)",
          form=Form("workflow", "e.g. my_agent.workflow:MathAgent",
                    help="module:Class with `async def run(self, data, **extra_kwargs)`")),
    Param("dataset", "--data", metavar="FILE", exclusive="data",
          help="JSONL dataset: each line a JSON object passed to run as `data` (other lines "
               "are skipped and listed)",
          form=Form("data", "e.g. prompts.jsonl (one dict a line, passed as data)",
                    key="data")),
    Param("prompt", "--prompt", metavar="TEXT", exclusive="data",
          help="a one-row dataset {\"prompt\": TEXT, \"messages\": [user TEXT]}",
          form=Form("or prompt", "one prompt, when there is no data file")),
    Param("base_url", "--base-url", metavar="URL",
          help="OpenAI-compatible base URL passed to run as base_url= (default: "
               "OPENAI_BASE_URL)",
          form=Form("base url", "default: OPENAI_BASE_URL")),
    Param("api_key", "--api-key", metavar="KEY",
          help="passed to run as api_key= (default: OPENAI_API_KEY, which keeps it off the "
               "command line); never printed or exported",
          form=Form("api key", "default: OPENAI_API_KEY", secret=True,
                    help="never shown, logged or exported")),
    Param("global_bs", "--global-bs", INT, 256, metavar="N",
          help="trainer's global batch size in prompts (default {default})",
          form=Form("global_bs", prefill=True)),
    Param("group_size", "--group-size", INT, 8, metavar="N",
          help="samples per prompt (default {default})",
          form=Form("group_size", prefill=True)),
    Param("rollout_dp_size", "--rollout-dp-size", INT, 4, metavar="N",
          help="rollout processes; local_bs = global_bs // rollout_dp_size (default {default})",
          form=Form("rollout_dp_size", prefill=True)),
    Param("concurrency", "--concurrency", INT, metavar="N",
          help="at most N runs in flight (default: all local_bs x group_size at once, like the "
               "trainer)",
          form=Form("concurrency cap", "default: all at once, as in RL")),
    Param("timeout", "--timeout", FLOAT, 60.0, metavar="S",
          help="seconds per run (default {default})",
          form=Form("timeout s", "default: {default} s per run", prefill=True,
                    said_as="timeout")),
    Param("paths", "--path", PATHS, (), metavar="DIR",
          help="added to the worker's sys.path (repeatable; default: the current folder)",
          form=Form("import path", "default: the current folder (where the module is found)",
                    key="path")),
    Param("extra_kwargs", "--kwargs", JSON, metavar="JSON",
          help="more extra_kwargs for run, a JSON object (e.g. '{\"model\": \"m\"}')",
          form=Form("extra kwargs", 'e.g. {"model": "my-model"} (JSON, passed to run)',
                    key="kwargs")),
    Param("init_kwargs", "--init-kwargs", JSON, metavar="JSON",
          help="keyword arguments for the class's constructor, a JSON object"),
    Param("sequential_prompts", "--sequential", INT, SEQUENTIAL_PROMPTS, metavar="K",
          minimum=0,
          help="prompts run one at a time before the concurrent step, to compare (default "
               "{default}; 0 skips the comparison)"),
    Param("force", "--force", FLAG, False,
          help="run the concurrent step even when the single run fails"),
    Param("loop_block_s", "--loop-block", FLOAT, 1.0, metavar="S",
          help="report the event loop as blocked when it does not answer for S seconds "
               "(default {default})"),
    Param("startup_timeout", "--startup-timeout", FLOAT, 120.0, metavar="S",
          help="seconds allowed to import and construct the workflow (default {default})"),
    Param("python", "--python", metavar="PATH",
          help="interpreter for the worker, e.g. the training venv's python (default: "
               "rltui's)"),
    Param("probe_server", "--no-probe", FLAG, True, negated=True,
          help="do not test that the base URL accepts connections first"),
    Param("json", "--json", FLAG, help="print the report as JSON", spec=False),
    Param("markdown", "--markdown", metavar="FILE", help="also write the report as markdown",
          spec=False),
)
