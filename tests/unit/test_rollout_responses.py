"""Reading the servers' documented answer shapes: vLLM completions and chat (token ids as
``token_id:N``, log-probs, top log-probs), plain OpenAI answers with text only, SGLang
/generate; greedy violations; refusals; URL handling."""

from __future__ import annotations

import pytest

from rltui.checks.rollout.compare import Generation
from rltui.checks.rollout.httpclient import scrub, secrets_of, server_urls
from rltui.checks.rollout.responses import BadResponse, read_chat, read_completion, read_generate
from rltui.checks.rollout.verify import refusal


def retok(text: str) -> list[int]:
    return [len(w) for w in text.split()]


def vllm_completion(ids, lps, top=None, text="x y", usage=5, finish="length", as_ids=True):
    token = (lambda i: f"token_id:{i}") if as_ids else (lambda i: f"t{i}")
    return {"object": "text_completion", "choices": [{
        "index": 0, "text": text, "finish_reason": finish,
        "logprobs": {"tokens": [token(i) for i in ids], "token_logprobs": lps,
                     "top_logprobs": top if top is not None else
                     [{token(i): lp} for i, lp in zip(ids, lps)],
                     "text_offset": list(range(len(ids)))}}],
        "usage": {"prompt_tokens": usage, "completion_tokens": len(ids)}}


def test_vllm_completion_with_token_ids():
    gen, violation = read_completion(vllm_completion([7, 8], [-0.5, -0.25]), retok)
    assert gen == Generation(token_ids=(7, 8), text="x y", logprobs=(-0.5, -0.25),
                             finish_reason="length", prompt_tokens=5)
    assert violation is None


def test_a_chosen_token_below_the_best_is_a_greedy_violation():
    top = [{"token_id:7": -0.5, "token_id:3": -0.1}, {"token_id:8": -0.25}]
    _, violation = read_completion(vllm_completion([7, 8], [-0.5, -0.25], top=top), retok)
    assert "token 0 was not the server's most likely token" in violation
    assert "did not decode greedily" in violation


def test_plain_openai_completion_is_re_tokenised():
    data = {"choices": [{"text": "ab cde", "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": 3}}
    gen, violation = read_completion(data, retok)
    assert gen.tokens_from_text and gen.token_ids == (2, 3) and gen.logprobs is None
    assert gen.prompt_tokens == 3 and violation is None


def test_token_strings_that_are_not_ids_fall_back_to_the_text():
    data = vllm_completion([1, 2], [-0.1, -0.2], text="aa b", as_ids=False)
    gen, _ = read_completion(data, retok)
    assert gen.tokens_from_text and gen.token_ids == (2, 1)
    assert gen.logprobs == (-0.1, -0.2)


def test_transformers_serve_completion_has_no_logprobs_key():
    data = {"id": "r", "object": "text_completion", "model": "m",
            "choices": [{"text": " one two", "index": 0, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}}
    gen, _ = read_completion(data, retok)
    assert gen.text == " one two" and gen.tokens_from_text and gen.prompt_tokens == 4


def test_vllm_chat_with_token_ids_and_top_logprobs():
    content = [{"token": "token_id:4", "logprob": -0.1,
                "top_logprobs": [{"token": "token_id:4", "logprob": -0.1}]},
               {"token": "token_id:5", "logprob": -2.0,
                "top_logprobs": [{"token": "token_id:6", "logprob": -0.3}]}]
    data = {"choices": [{"message": {"role": "assistant", "content": "hi there"},
                         "logprobs": {"content": content}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 9}}
    gen, violation = read_chat(data, retok)
    assert gen.token_ids == (4, 5) and gen.logprobs == (-0.1, -2.0) and gen.prompt_tokens == 9
    assert violation.startswith("token 1 ")


def test_chat_without_logprobs():
    data = {"choices": [{"message": {"content": "ab"}, "finish_reason": "stop"}]}
    gen, _ = read_chat(data, retok)
    assert gen.tokens_from_text and gen.prompt_tokens is None and gen.finish_reason == "stop"


def test_sglang_generate_with_logprobs():
    data = {"text": "a b", "output_ids": [11, 12], "meta_info": {
        "prompt_tokens": 6, "completion_tokens": 2,
        "finish_reason": {"type": "length", "length": 2},
        "output_token_logprobs": [[-0.2, 11, None], [-0.3, 12, None]],
        "output_top_logprobs": [[[-0.2, 11, None]], [[-0.3, 12, None]]]}}
    gen, violation = read_generate(data, retok)
    assert gen == Generation(token_ids=(11, 12), text="a b", logprobs=(-0.2, -0.3),
                             finish_reason="length", prompt_tokens=6)
    assert violation is None


def test_sglang_generate_plain_and_in_a_list():
    data = [{"text": "a b", "output_ids": [1, 2],
             "meta_info": {"finish_reason": {"type": "stop", "matched": 2},
                           "prompt_tokens": 3}}]
    gen, _ = read_generate(data, retok)
    assert gen.token_ids == (1, 2) and gen.logprobs is None and gen.finish_reason == "stop"


def test_sglang_logprob_ids_that_disagree_with_output_ids_drop_the_scores():
    data = {"text": "a", "output_ids": [1, 2], "meta_info": {
        "output_token_logprobs": [[-0.1, 1, None], [-0.1, 3, None]]}}
    gen, _ = read_generate(data, retok)
    assert gen.token_ids == (1, 2) and gen.logprobs is None


@pytest.mark.parametrize("reader, data, message", [
    (read_completion, {"choices": []}, "no choices"),
    (read_completion, [], "expected a JSON object"),
    (read_completion, {"choices": [{"finish_reason": "stop"}]}, "text is missing"),
    (read_chat, {"choices": [{"message": {}}]}, "content is missing"),
    (read_generate, {"meta_info": {}}, "no 'text'"),
    (read_generate, {"text": "", "meta_info": {"finish_reason": {"type": "abort",
                                                                 "message": "x"}}}, "aborted"),
])
def test_answers_without_the_documented_shape(reader, data, message):
    with pytest.raises(BadResponse, match=message):
        reader(data, retok)


@pytest.mark.parametrize("gen, reason", [
    (Generation((1, 2), "", prompt_tokens=5), "counted 5 prompt tokens where the reference"),
    (Generation((1,) * 5, "", prompt_tokens=4), "generated 5 tokens, more than max_new_tokens"),
    (Generation((1, 2), "", finish_reason="length"), "stopped for length after 2 of 4"),
    (Generation((1, 2), "", finish_reason="stop", prompt_tokens=4), None),
    (Generation((1,) * 9, "", tokens_from_text=True, finish_reason="length"), None),
])
def test_refusal(gen, reason):
    why = refusal("server", gen, prompt_len=4, max_new_tokens=4)
    assert (why is None) if reason is None else (reason in why)


def test_refusal_for_a_greedy_violation():
    why = refusal("server", Generation((1,), ""), prompt_len=1, max_new_tokens=1,
                  greedy_violation="token 0 was not ...")
    assert why == "the server: token 0 was not ..."


@pytest.mark.parametrize("url, v1, root, native", [
    ("http://h:8000/v1", "http://h:8000/v1", "http://h:8000", False),
    ("http://h:8000/v1/", "http://h:8000/v1", "http://h:8000", False),
    ("http://h:8000", "http://h:8000/v1", "http://h:8000", False),
    ("http://h:8000/generate", "http://h:8000/v1", "http://h:8000", True),
    ("https://h/api/v1", "https://h/api/v1", "https://h/api", False),
    ("http://h:1/x/generate/", "http://h:1/x/v1", "http://h:1/x", True),
])
def test_server_urls(url, v1, root, native):
    urls = server_urls(url)
    assert (urls.v1, urls.root, urls.native_generate) == (v1, root, native)
    assert urls.generate == root + "/generate"


def test_scrub_hides_the_key():
    assert scrub("bad key sk-123 here", "sk-123") == "bad key *** here"
    assert scrub("nothing", None) == "nothing"
    # and whatever rltui.redact hides, key given or not
    assert scrub("cannot reach http://u:pw@h/v1?api_key=k1 (refused)", None) == \
        "cannot reach http://u:***@h/v1?api_key=*** (refused)"


def test_a_query_string_is_kept_for_every_request_and_left_out_of_the_bases():
    urls = server_urls("http://u:pw@h:8000/v1?api_key=k1&x=")
    assert (urls.v1, urls.root) == ("http://h:8000/v1", "http://h:8000")
    assert urls.params == (("api_key", "k1"), ("x", ""))


@pytest.mark.parametrize("url, credentials, v1", [
    # the user-info never stays in the bases (the client would make it a Basic header that
    # replaces the key's Bearer one); it is kept apart, decoded
    ("http://u:p%40ss%2Fw@h:8000/v1", ("u", "p@ss/w"), "http://h:8000/v1"),
    ("https://tok-abc@[::1]:9/v1", ("tok-abc", ""), "https://[::1]:9/v1"),
    ("http://h:8000/v1", None, "http://h:8000/v1"),
])
def test_the_user_info_is_kept_apart_from_the_bases(url, credentials, v1):
    urls = server_urls(url)
    assert (urls.credentials, urls.v1) == (credentials, v1)
    assert "p@ss" not in repr(urls) and "tok-abc" not in repr(urls)


def test_the_secrets_of_a_server_are_the_key_and_what_its_url_carries():
    found = secrets_of("http://u:p%40ss-1@h/v1?api_key=q+k-2&model=m", "sk-key-3")
    assert set(found) == {"sk-key-3", "p%40ss-1", "p@ss-1", "q+k-2", "q k-2"}
    assert list(found) == sorted(found, key=len, reverse=True)
    # a lone user-info (often a token) counts; secrets under 4 characters are left to patterns
    assert secrets_of("https://tok-abcdef@h/v1", None) == ("tok-abcdef",)
    assert secrets_of("http://u:ab@h/v1", "xyz") == ()


def test_scrub_hides_every_secret_echoed_bare_longest_first():
    secrets = secrets_of("http://u:pass-word-1@h/v1?key=qk-22", "sk-key-333")
    echoed = "rejected u pass-word-1 with qk-22, and sk-key-333 (also pass-word-1x)"
    assert scrub(echoed, secrets) == "rejected u *** with ***, and *** (also ***x)"
    assert scrub("ab and xyz stay", ["ab", "xyz"]) == "ab and xyz stay"


def test_a_connection_error_names_the_url_without_its_secrets():
    from rltui.checks.rollout.httpclient import classify, http_module

    err = classify(http_module().ConnectError("refused"), "http://u:pw-1@h/v1/models?key=k-2", 5)
    assert err.kind == "connection" and "pw-1" not in str(err) and "k-2" not in str(err)
    assert str(err) == "cannot reach http://u:***@h/v1/models?key=*** (refused)"


def test_vllm_return_token_ids_wins_over_text_and_log_prob_tokens():
    plain = {"choices": [{"text": "ab c", "finish_reason": "length", "token_ids": [40, 41]}],
             "usage": {"prompt_tokens": 2}}
    gen, _ = read_completion(plain, retok)
    assert gen.token_ids == (40, 41) and not gen.tokens_from_text and gen.logprobs is None
    with_text_tokens = vllm_completion([1, 2], [-0.1, -0.2], text="a b", as_ids=False)
    with_text_tokens["choices"][0]["token_ids"] = [7, 8]
    gen, _ = read_completion(with_text_tokens, retok)
    assert gen.token_ids == (7, 8) and gen.logprobs == (-0.1, -0.2)
    chat = {"choices": [{"message": {"content": "x"}, "finish_reason": "stop",
                         "token_ids": [5]}]}
    gen, _ = read_chat(chat, retok)
    assert gen.token_ids == (5,) and not gen.tokens_from_text
