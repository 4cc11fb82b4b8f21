"""Secret redaction: the naming rule, the command-line forms, and a property that no secret
value survives whatever surrounds it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rltui.redact import (
    _NOT_SECRET_BEFORE,
    REDACTED,
    is_secret_name,
    redact_argv,
    redact_env,
    scrub_text,
)


@pytest.mark.parametrize("name", [
    "OPENAI_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY",
    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "DB_PASSWORD", "PASSWD", "MYSQL_PWD_PASSWORD",
    "GOOGLE_APPLICATION_CREDENTIALS", "GITHUB_TOKEN", "SECRET_KEY_BASE", "CLIENT_SECRET",
    "api-key", "api_key", "hf-token", "apiKey", "HFToken", "openaiApiKey", "OPENAI_APIKEY",
    "actor_rollout_ref.rollout.api_key", "Authorization", "X-Api-Key", "KEY", "TOKEN",
    "SSH_PASSPHRASE", "REDIS_PASS", "BASIC_AUTH", "SESSION_COOKIE", "wandb.key",
])
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", [
    "TOKENIZERS_PARALLELISM", "KEY_FRAMES", "PWD", "OLDPWD", "PATH", "HOME", "NCCL_DEBUG",
    "CUDA_VISIBLE_DEVICES", "AWS_ACCESS_KEY_ID", "MAX_NEW_TOKENS",
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu", "input_key", "--label_key",
    "data.prompt_key", "data.reward_fn_key", "chosen_key", "pad_token", "eos_token",
    "HF_TOKEN_PATH", "KEYBOARD", "MONKEY", "TOKENS", "", "---",
])
def test_not_secret_names(name):
    assert not is_secret_name(name)


@pytest.mark.parametrize("argv, expected", [
    (["python", "train.py", "--api-key", "X1"], ["python", "train.py", "--api-key", REDACTED]),
    (["python", "train.py", "--api_key=X1"], ["python", "train.py", f"--api_key={REDACTED}"]),
    (["--hf-token", "hf_x", "--lr", "1e-6"], ["--hf-token", REDACTED, "--lr", "1e-6"]),
    (["env", "OPENAI_API_KEY=sk-abc", "python"], ["env", f"OPENAI_API_KEY={REDACTED}", "python"]),
    (["actor_rollout_ref.rollout.api_key=abc", "data.prompt_key=prompt"],
     [f"actor_rollout_ref.rollout.api_key={REDACTED}", "data.prompt_key=prompt"]),
    (["+trainer.wandb_key=abc"], [f"+trainer.wandb_key={REDACTED}"]),
    (["--input_key", "question", "--label_key", "answer"],
     ["--input_key", "question", "--label_key", "answer"]),
    (["-H", "Authorization: Bearer abc.def-ghi"], ["-H", f"Authorization: {REDACTED}"]),
    (["Bearer", "abc"], ["Bearer", REDACTED]),
    (["--use-auth", "--verbose"], ["--use-auth", "--verbose"]),
    (["--api-key"], ["--api-key"]),
    (["--api-key="], ["--api-key="]),
    (["--key", "sk-proj-0123456789abcdefXYZ"], ["--key", REDACTED]),
    (["--model", "sk-proj-0123456789abcdefXYZ"], ["--model", REDACTED]),
    (["--base-url=https://bob:hunter2@example.com/v1"],
     [f"--base-url=https://bob:{REDACTED}@example.com/v1"]),
    (["--url", "http://h/x?api_key=abc&n=1"], ["--url", f"http://h/x?api_key={REDACTED}&n=1"]),
    (["--config", '{"api_key": "a b c", "n": 1}'],
     ["--config", f'{{"api_key": "{REDACTED}", "n": 1}}']),
    (["ghp_0123456789abcdefghijABCD"], [REDACTED]),
    (["hf_0123456789abcdefghijABCD"], [REDACTED]),
    (["AKIAABCDEFGHIJKLMNOP"], [REDACTED]),
    (["--task-0123456789abcdefghij"], ["--task-0123456789abcdefghij"]),  # "sk-" inside a word
    (["actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384"],
     ["actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384"]),
    ([], []),
])
def test_redact_argv(argv, expected):
    assert redact_argv(argv) == tuple(expected)


def test_redact_env():
    env = {"OPENAI_API_KEY": "sk-1", "PATH": "/usr/bin", "NCCL_DEBUG": "INFO",
           "OPENAI_BASE_URL": "https://u:pw@host/v1", "EXTRA": "--api-key=zzz"}
    assert redact_env(env) == {"OPENAI_API_KEY": REDACTED, "PATH": "/usr/bin", "NCCL_DEBUG": "INFO",
                               "OPENAI_BASE_URL": f"https://u:{REDACTED}@host/v1",
                               "EXTRA": f"--api-key={REDACTED}"}
    assert env["OPENAI_API_KEY"] == "sk-1"  # a copy; the input is untouched


@pytest.mark.parametrize("text, expected", [
    ("plain text, nothing here: 12:30", "plain text, nothing here: 12:30"),
    ("token=abc;other=1", f"token={REDACTED};other=1"),
    ("password: 'p w d'", f"password: '{REDACTED}'"),
    ("Authorization: token abc", f"Authorization: {REDACTED}"),
    ("curl -u user:pw https://x", "curl -u user:pw https://x"),  # no key name, no known shape
])
def test_scrub_text(text, expected):
    assert scrub_text(text) == expected


# -- properties ------------------------------------------------------------------------------------

# Secret values carry a marker that appears nowhere in the surrounding material, so "the value
# is in the output" can be tested as a substring check.
MARK = "Zq9"
value_chars = st.characters(codec="ascii", categories=["L", "N"], include_characters="-_.+/=~")
secrets = st.text(value_chars, min_size=4, max_size=40).map(lambda s: MARK + s)
url_safe = st.text(st.characters(codec="ascii", categories=["L", "N"], include_characters="-_.~"),
                   min_size=4, max_size=30).map(lambda s: MARK + s)
fillers = st.sampled_from(["python", "-m", "verl.trainer.main_ppo", "--lr", "1e-6", "train.py",
                           "trainer.n_gpus_per_node=8", "--input_key", "prompt", "-u",
                           "data.prompt_key=question", "--verbose", "torchrun"])
SECRET_FLAGS = ["--api-key", "--api_key", "--hf-token", "--hf_token", "--openai-api-key",
                "--password", "--wandb-api-key", "--secret"]
SECRET_VARS = ["OPENAI_API_KEY", "HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY",
               "DB_PASSWORD", "actor.rollout.api_key", "+trainer.hf_token"]


@st.composite
def secret_args(draw):
    secret = draw(secrets)
    form = draw(st.integers(0, 5))
    if form == 0:
        return secret, [draw(st.sampled_from(SECRET_FLAGS)), secret]
    if form == 1:
        return secret, [f"{draw(st.sampled_from(SECRET_FLAGS))}={secret}"]
    if form == 2:
        return secret, [f"{draw(st.sampled_from(SECRET_VARS))}={secret}"]
    if form == 3:
        return secret, ["-H", f"Authorization: Bearer {secret}"]
    if form == 4:
        return secret, ["Bearer", secret]
    safe = draw(url_safe)
    return safe, [f"--base-url=https://user:{safe}@example.com/v1"]


@given(st.lists(st.one_of(secret_args(), fillers.map(lambda f: (None, [f]))), max_size=12))
def test_no_secret_survives_redact_argv(pieces):
    argv = [arg for _, args in pieces for arg in args]
    out = redact_argv(argv)
    assert len(out) == len(argv)
    joined = "\x00".join(out)
    for secret, _ in pieces:
        if secret is not None:
            assert secret not in joined


@st.composite
def secret_names(draw):
    # a vendor or tool name; the data-field words (PAD_TOKEN, INPUT_KEY) are the documented
    # exception and are pinned by the tables above
    prefix = draw(st.from_regex(r"[A-Z][A-Z0-9]{0,7}", fullmatch=True)
                  .filter(lambda p: p not in _NOT_SECRET_BEFORE))
    suffix = draw(st.sampled_from(["API_KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD",
                                   "SECRET_ACCESS_KEY", "AUTH_TOKEN", "ACCESS_KEY"]))
    return f"{prefix}_{suffix}"


# no ":" or "=" in ordinary values: "token:abc" is a secret assignment and would be hidden
plain_values = st.text(st.characters(codec="ascii", categories=["Ll", "Nd"],
                                     include_characters="/,.-"), max_size=20)
plain_names = st.sampled_from(["PATH", "HOME", "NCCL_DEBUG", "CUDA_VISIBLE_DEVICES", "RANK",
                               "TOKENIZERS_PARALLELISM", "MASTER_ADDR", "PAD_TOKEN"])


@given(st.dictionaries(secret_names(), secrets, max_size=6),
       st.dictionaries(plain_names, plain_values, max_size=6))
def test_no_secret_survives_redact_env(secret_env, plain_env):
    out = redact_env(secret_env | plain_env)
    for name in secret_env:
        assert out[name] == REDACTED
    assert {k: out[k] for k in plain_env} == plain_env  # ordinary values pass unchanged
    joined = "\x00".join(out.values())
    assert not any(value in joined for value in secret_env.values())


@given(secret_names())
def test_vendor_prefixed_secret_names_are_secret(name):
    assert is_secret_name(name) and is_secret_name(name.lower())


def test_a_secret_glued_after_an_escape_sequence_is_still_hidden():
    """A terminal escape that ends in digits and a letter (``ESC[2J``) glued to an assignment:
    the name starts after a digit, and the value is hidden all the same."""
    from rltui.redact import scrub_text
    out = scrub_text("\x1b[2JWANDB_API_KEY=abcd1234efgh5678")
    assert "abcd1234efgh5678" not in out and out.endswith("=" + REDACTED)
    assert scrub_text("12:30 step=5") == "12:30 step=5"
