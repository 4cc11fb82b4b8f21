"""Hide secrets in environment variables and command lines. Pure: no I/O.

Everything rltui shows, prints as JSON or records passes through here first, so a screenshot, a
pasted ``--json`` or a shared recording never carries an API key.

The rule for names (environment variables, ``--flags``, ``key=value`` keys), applied to the
words of the name (split at ``_ - .``, spaces and camelCase, compared upper-case):

* secret when any word is SECRET, PASSWORD, PASSWD, PASSPHRASE, CREDENTIAL(S) or APIKEY
  (``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD``, ``GOOGLE_APPLICATION_CREDENTIALS``);
* secret when a word is PWD and the name is more than that (``DB_PWD``; ``PWD`` alone is the
  shell's working directory);
* secret when the *last* word is KEY, TOKEN, AUTH, AUTHORIZATION, PASS, CREDS or COOKIE
  (``OPENAI_API_KEY``, ``HF_TOKEN``, ``--api-key``, ``--hf_token``), because a word in the middle
  usually qualifies something else: ``TOKENIZERS_PARALLELISM``, ``KEY_FRAMES``,
  ``ppo_max_token_len_per_gpu`` are not secrets;
* except when KEY or TOKEN follows a word that names a data field or a tokenizer token:
  ``--input_key``, ``--label_key``, ``data.prompt_key``, ``pad_token``, ``eos_token`` (OpenRLHF,
  verl and tokenizer settings that must stay readable).

Values are also scrubbed wherever they appear, whatever their name: ``Bearer``/``Basic``
credentials, ``user:password@`` in URLs, well-known token shapes (``sk-...``, ``hf_...``,
``ghp_...``, ``xoxb-...``, ``AKIA...``, ``AIza...``, ``ya29....``, JWTs, PEM private-key
blocks), ``-k VALUE``, and ``secret_name=value`` / ``"secret_name": "value"`` inside a longer
string. The user-info of a URL in free text is hidden too: the password, whatever it holds
(``/``, ``@``), or a lone user (``https://TOKEN@host``). Every pattern is linear in its input
(see the comment above them): a megabyte-long log line costs milliseconds, never minutes. A false positive hides a harmless value; a false negative leaks a key,
so the rule leans towards hiding.

``redact_url`` is the stricter form for a whole URL that is about to be shown (a report's
settings, an error message): the user-info's password, or a lone user name (often a token), and
the values of query parameters with secret names are hidden, whatever their characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from urllib.parse import unquote_plus

REDACTED = "***"

_SECRET_ANYWHERE = frozenset(
    {"SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS",
     "APIKEY"})
_SECRET_LAST = frozenset({"KEY", "TOKEN", "AUTH", "AUTHORIZATION", "PASS", "CREDS", "COOKIE"})
# Words before KEY/TOKEN that make the name a data field or a tokenizer token, not a secret.
_NOT_SECRET_BEFORE = frozenset(
    {"INPUT", "LABEL", "PROMPT", "RESPONSE", "REWARD", "FN", "OUTPUT", "CHOSEN", "REJECTED",
     "IMAGE", "IMAGES", "VIDEO", "VIDEOS", "AUDIO", "TEXT", "QUERY", "ANSWER", "SOLUTION",
     "MESSAGE", "MESSAGES", "DATA", "DATASET", "COLUMN", "FIELD", "SORT", "CACHE", "PRIMARY",
     "FOREIGN", "PARTITION", "PAD", "EOS", "BOS", "UNK", "SEP", "CLS", "MASK", "SPECIAL",
     "STOP", "START", "END"})

_CAMEL_1 = re.compile(r"([A-Z])([A-Z][a-z])")  # not [A-Z]+: linear on a long run
_CAMEL_2 = re.compile(r"([a-z0-9])([A-Z])")
_WORD_SPLIT = re.compile(r"[^A-Z0-9]+")


def _words(name: str) -> list[str]:
    name = _CAMEL_2.sub(r"\1_\2", _CAMEL_1.sub(r"\1_\2", name))
    return [w for w in _WORD_SPLIT.split(name.upper()) if w]


# Every secret name holds one of these; most names hold none and are judged without splitting.
_HINTS = ("SECRET", "PASS", "PWD", "CRED", "APIKEY", "KEY", "TOKEN", "AUTH", "COOKIE")


def is_secret_name(name: str) -> bool:
    """True when a variable, flag or key called ``name`` likely holds a secret (rule above)."""
    return _is_secret_name(name[-MAX_NAME:])


@lru_cache(maxsize=4096)  # names repeat (a log's keys, an environment's variables)
def _is_secret_name(name: str) -> bool:
    upper = name.upper()
    if not any(hint in upper for hint in _HINTS):
        return False
    words = _words(name)
    if not words:
        return False
    if any(w in _SECRET_ANYWHERE for w in words):
        return True
    if "PWD" in words and words != ["PWD"]:  # DB_PWD; PWD alone is the working directory
        return True
    last = words[-1]
    if last not in _SECRET_LAST:
        return False
    if last in ("KEY", "TOKEN") and len(words) > 1 and words[-2] in _NOT_SECRET_BEFORE:
        return False
    return True


# Value shapes that are secrets wherever they appear.
#
# Every pattern here runs in time linear in its input, whatever the input: a log line can be a
# megabyte of word characters (a collapsed RL sample, a hex dump), and a pattern that retried
# from each position of such a run took minutes on one line (the agent missed its heartbeats).
# So no pattern may start inside a run of the characters it goes on to read: a negative
# look-behind on the same class replaces ``\b``, and each run is read once. The URL rule is a
# small loop instead of one expression for the same reason.
_TOKEN_START = r"(?<![A-Za-z0-9_\-])"
_SCHEME = re.compile(r"(?i)(?<![A-Za-z0-9_\-])(bearer|basic)(\s+)[A-Za-z0-9\-._~+/=]+")
_TOKEN_SHAPES = re.compile(
    _TOKEN_START +
    r"(?:sk-[A-Za-z0-9_\-]{16,}"  # OpenAI (sk-proj-...), Anthropic (sk-ant-...)
    r"|hf_[A-Za-z0-9]{20,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_\-]{20,}"
    r"|xox[abeprs]-[A-Za-z0-9\-]{10,}"
    r"|xapp-[A-Za-z0-9\-]{10,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_\-]{30,}"  # Google API key
    r"|ya29\.[0-9A-Za-z_\-]{20,}"  # Google OAuth access token
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"  # JWT
    r")")
_PRIVATE_KEY = re.compile(r"-----BEGIN[A-Z ]{0,40} PRIVATE KEY-----")
_PRIVATE_KEY_END = re.compile(r"-----END[A-Z ]{0,40} PRIVATE KEY-----")
# ``-k VALUE`` (a short flag that tools use for a key) inside a longer string.
_SHORT_KEY = re.compile(r"(?<!\S)(-k)(\s+)(?!-)\S+")
# ``name=value``, ``name: value``, ``"name": "value"`` inside a longer string.
_ASSIGN = re.compile(r"""(?<![\w.\-])-*([A-Za-z0-9_][\w.\-]*)(["']?)(\s*[:=]\s*)(["']?)""")
# ``--secret-flag value`` inside a longer string (a command line quoted in a log); a short
# lower-case word after it is prose, not a value (``--api-key or OPENAI_API_KEY``).
_FLAG_SPACE = re.compile(r"(?<![\w.\-])--([A-Za-z][\w.\-]*)\s+(?=[^\s\-])")
_PROSE = re.compile(r"[a-z]{1,10}")
_BARE_VALUE = re.compile(r"""(?i)(?:(?:bearer|basic|token)\s+)?[^\s"',;&}\]]*""")
_URL_START = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://")
_SPACE = re.compile(r"\s")
_PORT = re.compile(r"[0-9]+(?:/|$)")
MAX_NAME = 200  # a secret's name is short; longer "names" are judged by their last characters


def _scrub_assignments(text: str, pattern: re.Pattern = _ASSIGN) -> str:
    out: list[str] = []
    pos = 0
    for m in pattern.finditer(text):
        if m.start() < pos or not is_secret_name(m.group(1)):
            continue  # inside a value already hidden, or an ordinary key
        start = m.end()
        quote = m.group(4) if pattern is _ASSIGN else ""
        if quote:
            end = text.find(quote, start)
            end = len(text) if end < 0 else end
        else:
            end = _BARE_VALUE.match(text, start).end()
            if pattern is _FLAG_SPACE and _PROSE.fullmatch(text, start, end):
                continue  # "(--api-key or OPENAI_API_KEY)": a flag named in a sentence
        if end > start:
            out += [text[pos:start], REDACTED]
            pos = end
    out.append(text[pos:])
    return "".join(out)


def _scrub_urls(text: str) -> str:
    """The user-info of every ``scheme://`` URL in ``text``: the password (``user:***@host``),
    or a lone user, which is often a token (``https://***@host``). The user-info ends at the
    last ``@`` of the URL's run of non-spaces, so a password holding ``/`` or ``@`` is hidden
    whole; an ``@`` after a ``/`` that comes before any ``:`` is in the path and stays, and so
    does ``host:8080/path@x``'s port."""
    if "://" not in text:
        return text
    out: list[str] = []
    pos = 0
    run_end = last_at = -1
    for m in _URL_START.finditer(text):
        start = m.end()
        if start < pos:
            continue
        if start > run_end:  # one search per run of non-spaces, however many URLs it holds
            space = _SPACE.search(text, start)
            run_end = space.start() if space else len(text)
            last_at = text.rfind("@", start, run_end)
        if last_at < start:
            continue
        colon = text.find(":", start, last_at)
        slash = text.find("/", start, last_at)
        if slash >= 0 and (colon < 0 or slash < colon):
            continue  # the @ is in the path
        if colon >= 0 and slash >= 0 and _PORT.match(text, colon + 1, slash + 1):
            continue  # host:port/path@x
        hide_from = colon + 1 if colon >= 0 else start
        out += [text[pos:hide_from], REDACTED]
        pos = last_at
    out.append(text[pos:])
    return "".join(out)


def _scrub_private_keys(text: str) -> str:
    """A PEM private key block, from its BEGIN line to its END line (or the end of the text:
    a key cut by a log line's end is still hidden)."""
    out: list[str] = []
    pos = 0
    while True:
        m = _PRIVATE_KEY.search(text, pos)
        if not m:
            break
        end = _PRIVATE_KEY_END.search(text, m.end())
        out += [text[pos:m.start()], "-----BEGIN PRIVATE KEY-----", REDACTED]
        if end is None:
            pos = len(text)
            break
        out.append("-----END PRIVATE KEY-----")
        pos = end.end()
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


def scrub_text(text: str) -> str:
    """Hide secret-looking values inside free text (one argument, one env value, one log line,
    a whole report). Linear in ``len(text)`` (see above)."""
    text = _scrub_private_keys(text)
    text = _scrub_urls(text)
    text = _SCHEME.sub(rf"\1\2{REDACTED}", text)
    text = _TOKEN_SHAPES.sub(REDACTED, text)
    text = _SHORT_KEY.sub(rf"\1\2{REDACTED}", text)
    if "--" in text:
        text = _scrub_assignments(text, _FLAG_SPACE)
    return _scrub_assignments(text)


def _redact_query_param(param: str) -> str:
    name, eq, value = param.partition("=")
    if eq and value and is_secret_name(unquote_plus(name)):
        return f"{name}={REDACTED}"
    return param


_URL_PARTS = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)([^?#]*)(?:\?([^#]*))?(#.*)?", re.DOTALL)


def redact_url(url: str) -> str:
    """``url`` as it may be shown: ``http://user:***@host/v1?api_key=***``. The password in the
    user-info (or the whole user-info when it has no ``:``: ``https://TOKEN@host``) and the
    values of query parameters with secret names become ``REDACTED``; ``scrub_text`` then hides
    token shapes anywhere in it. Text that is not a URL is only scrubbed.

    Split by hand rather than with ``urlsplit``: a password with an unescaped ``/`` or ``#``
    would move into the path there and show. The user-info ends at the last ``@`` before the
    query, so a path with an ``@`` (rare in a server URL) is hidden too: the rule leans towards
    hiding."""
    m = _URL_PARTS.fullmatch(url.strip())
    if not m:
        return scrub_text(url)
    scheme, rest, query, fragment = m.group(1), m.group(2), m.group(3), m.group(4) or ""
    if "@" in rest:
        userinfo, host = rest.rsplit("@", 1)
        user, colon, _ = userinfo.partition(":")
        rest = f"{user}:{REDACTED}@{host}" if colon else f"{REDACTED}@{host}"
    if query is not None:
        rest += "?" + "&".join(_redact_query_param(p) for p in query.split("&"))
    return scrub_text(scheme + rest + fragment)


def redact_env(mapping: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``mapping``: secret names get ``REDACTED``, other values are scrubbed."""
    return {name: REDACTED if is_secret_name(name) else
            (scrub_text(value) if isinstance(value, str) else value)
            for name, value in mapping.items()}


SHORT_SECRET_FLAGS = frozenset({"-k"})  # ``-k KEY``: the short flags tools give an API key
_FLAG = re.compile(r"-{1,2}([A-Za-z][\w.\-]*)")
_ARG_NAME = re.compile(r"[A-Za-z_][\w.\-]*[:=]")  # ``api_key:`` with its value next
_ARG_ASSIGN = re.compile(r"([-+]{0,2}[A-Za-z_][\w.\-]*)=(.*)", re.DOTALL)


def redact_argv(argv: Iterable[str]) -> tuple[str, ...]:
    """A copy of a command line with secrets replaced by ``REDACTED``.

    Handles ``--api-key X``, ``--api_key=X``, ``NAME=X`` (``env`` prefixes, Hydra overrides such
    as ``a.b.api_key=X``), ``Bearer X`` split over two arguments, and the value shapes that
    ``scrub_text`` hides. The argument after a secret flag is hidden unless it is itself a long
    option (``--use-auth --verbose``): a secret that starts with ``--`` would show.
    """
    out: list[str] = []
    hide_next = in_key = False
    seen: list[str] = []
    for arg in argv:
        seen.append(arg)
        if in_key:  # a PEM private key split into arguments: hidden up to its END line
            in_key = not arg.startswith("-----END")
            out.append(arg if not in_key else REDACTED)
            continue
        if (arg.startswith("KEY-----") and len(seen) > 2 and seen[-2] == "PRIVATE"
                and any(a.startswith("-----BEGIN") for a in seen[-5:-1])):
            out.append(arg)
            in_key = True
            continue
        if hide_next and not arg.startswith("--"):
            if arg.lower() in ("bearer", "basic"):  # ``Authorization: Bearer X``
                out.append(arg)
                continue
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        flag = _FLAG.fullmatch(arg)
        if ((flag and is_secret_name(flag.group(1))) or arg.lower() in ("bearer", "basic")
                or arg in SHORT_SECRET_FLAGS
                or (_ARG_NAME.fullmatch(arg) and is_secret_name(arg[:-1]))):
            out.append(arg)
            hide_next = True
            continue
        assign = _ARG_ASSIGN.fullmatch(arg)
        if assign and assign.group(2) and is_secret_name(assign.group(1)):
            out.append(f"{assign.group(1)}={REDACTED}")
            continue
        out.append(scrub_text(arg))
    return tuple(out)


def url_secrets(url: str) -> list[str]:
    """The secrets a URL may carry, as written in it: the password of its user-info (or a lone
    user-info, often a token), and the values of query parameters with secret names. Split by
    hand, as ``redact_url`` does: ``urlsplit`` would move a password holding ``/`` into the
    path. A server that echoes one of them back (decoded, in an error) is hidden only when the
    caller replaces these values verbatim; add their ``unquote`` forms too."""
    _, sep, rest = url.partition("://")
    if not sep:
        return []
    rest, _, query = rest.partition("?")
    out = []
    if "@" in rest:
        userinfo = rest.rsplit("@", 1)[0]
        user, colon, password = userinfo.partition(":")
        out.append(password if colon else user)
    for param in query.split("#")[0].split("&") if query else ():
        name, eq, value = param.partition("=")
        if eq and value and is_secret_name(unquote_plus(name)):
            out.append(value)
    return out


MIN_SECRET_LEN = 4  # shorter values are left to the patterns: hiding every "ab" hides nothing


def hide_secrets(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with each of ``secrets`` (known values: an API key, a URL's password) replaced,
    longest first so that a secret holding another is hidden whole, then ``scrub_text``."""
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LEN}, key=len,
                         reverse=True):
        text = text.replace(secret, REDACTED)
    return scrub_text(text)
