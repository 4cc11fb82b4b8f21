"""Where Ray's auth token is found (rltui.remote.ray.auth), in Ray's own order, never shown."""

from __future__ import annotations

from rltui.remote.ray.auth import MAX_TOKEN_BYTES, find_token


def test_the_environment_wins_then_the_named_file_then_the_home_file(tmp_path):
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("from-home\n")
    named = tmp_path / "tok"
    named.write_text("from-path")
    env = {"RAY_AUTH_TOKEN": "from-env", "RAY_AUTH_TOKEN_PATH": str(named)}
    assert find_token(env, str(home))[0].value == "from-env"
    del env["RAY_AUTH_TOKEN"]
    assert find_token(env, str(home))[0].value == "from-path"
    assert find_token({}, str(home))[0].source == str(home / ".ray" / "auth_token")
    assert find_token({"RAY_AUTH_TOKEN": "  "}, str(home))[0].value == "from-home"


def test_nothing_anywhere_is_no_token_and_no_complaint(tmp_path):
    assert find_token({}, str(tmp_path)) == (None, "")


def test_a_bad_token_file_says_why_without_its_content(tmp_path):
    big = tmp_path / "big"
    big.write_bytes(b"x" * (MAX_TOKEN_BYTES + 1))
    assert "over" in find_token({"RAY_AUTH_TOKEN_PATH": str(big)}, str(tmp_path))[1]
    spaced = tmp_path / "spaced"
    spaced.write_text("two words")
    token, why = find_token({"RAY_AUTH_TOKEN_PATH": str(spaced)}, str(tmp_path))
    assert token is None and "holds no token" in why and "two words" not in why
    token, why = find_token({"RAY_AUTH_TOKEN_PATH": str(tmp_path / "none")}, str(tmp_path))
    assert token is None and "does not exist" in why


def test_the_token_is_not_in_its_repr():
    token, _ = find_token({"RAY_AUTH_TOKEN": "s3cr3t-value"}, "/nonexistent")
    assert "s3cr3t-value" not in repr(token)
