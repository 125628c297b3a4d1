"""Untrusted text made safe to write, print and paste: secrets redacted (control characters and
Markdown: untrusted.py).

Everything the tool writes or prints passes through `redact()` once, at the writer
(`write_text`/`write_json` in the output folder) and at the printer (`printer.SafeStream` around stdout and
stderr): a secret is caught wherever it came from (a log line, a process title, a source line,
a State API row). What is redacted:

- known token shapes (`RULES`: AWS access key ids and secret keys, Hugging Face, GitHub, OpenAI /
  Anthropic style `sk-` keys, Stripe, Google API keys, GitLab, npm, Slack tokens and webhooks,
  JWTs, PEM private keys);
- a value after a secret-looking word (`key`, `token`, `secret`, `password`, `authorization`,
  `api_key`, `credential`, `signature`) and `=`, `:` or `Bearer`, or after a command-line flag
  naming one (`--hf-token VALUE`, `--db-password=VALUE`);
- credentials in URLs (`user:pass@host`, `X-Amz-Signature=`, `X-Amz-Credential=`, `sig=`, ...);
- every value seen under a secret-looking environment variable name (`learn_env`): learnt from
  the jobs' `runtime_env` env_vars and the targets' `/proc/PID/environ`, redacted wherever it
  appears afterwards. A node's probe redacts what it reads there with the values themselves and
  hands back only salted digests (`digests`/`learn_digests`): a value never leaves its node.

`safe_text()` also removes control characters (`untrusted.strip_controls`); `untrusted.py` puts
untrusted text into Markdown so that it can never add structure (a heading, a fence, a link, HTML).
Every pass is a handful of linear regex scans with bounded repetitions: O(n) in the input.
Pure standard library: the node probe may import it.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

from debug_hang.untrusted import strip_controls

REDACTED = "[REDACTED]"

# An environment variable (or a JSON key) whose value is a secret, by its name.
SECRET_NAME = re.compile(
    r"(?i)(secret|token|passw(?:or)?d|passphrase|api_?key|access_?key|private_?key|credential|"
    r"auth(?:orization|_?key)?$|signature|^key$|_key$|cookie|sessionid|dsn$|connection_?string)"
)
# Values too plain to redact everywhere they appear (a flag, a count, a switch).
_PLAIN_VALUE = re.compile(r"(?i)^(true|false|yes|no|on|off|none|null|\d{1,6}|[a-z]{1,5})$")
MIN_LEARNT_LENGTH = 6
MIN_SECRET_TEXT = 6  # shorter text can hold no rule's match and no learnt value
CACHED_LENGTH = 200  # strings up to this long are remembered (they repeat across rows)
CACHE_SIZE = 100_000


@dataclass(frozen=True)
class Rule:
    """One token shape: `pattern` matches the secret itself; it runs only on text holding one of
    its `triggers` (lower-case literals; none: text of 40+ characters). `example` is a positive,
    `near_miss` a look-alike that must stay (both checked by tests/test_redact.py)."""

    id: str
    pattern: str
    triggers: tuple[str, ...]
    example: str
    near_miss: str


_B64 = "A-Za-z0-9+/"
RULES: tuple[Rule, ...] = (
    Rule("aws-access-key-id", r"(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])",
         ("akia", "asia", "agpa", "aida", "aroa", "aipa", "anpa", "anva", "abia", "acca"),
         "AKIAZ7EXAMPLEQ4XUJ2D", "AKIA-IS-NOT-A-KEY"),
    # A bare 40-character base64 run with upper, lower case and digits: an AWS secret access key.
    # (Ray ids are lower-case hex; a longer or shorter run is some other blob.) Candidates are
    # found with a plain 40-character class run, the rest is checked in _aws_secret.
    Rule("aws-secret-access-key", rf"[{_B64}]{{40}}", (),
         "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLE9KY", "ffffffffffffffffffffffffffffffffffffffff"),
    Rule("huggingface", r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{20,}", ("hf_",), "hf_XyZ12abcDEFghiJKLmnoPQRstuVWXyz0", "hf_hub"),
    Rule("github", r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
         ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
         "ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ", "ghp_short"),
    Rule("sk-key", r"(?<![A-Za-z0-9_-])sk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{20,}", ("sk-",),
         "sk-proj-4f9Qm2LxT8vN1cR7yB3kZ0aW", "task-worker-assignment-2"),
    Rule("stripe", r"(?<![A-Za-z0-9_-])[sr]k_(?:live|test)_[A-Za-z0-9]{16,}", ("sk_live_", "sk_test_", "rk_live_", "rk_test_"),
         "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "task_live_status"),
    Rule("google-api-key", r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}", ("aiza",),
         "AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI", "AIzaShort"),
    Rule("gitlab-npm", r"(?<![A-Za-z0-9_-])(?:glpat-[A-Za-z0-9_-]{20,}|npm_[A-Za-z0-9]{36})", ("glpat-", "npm_"),
         "glpat-xZ81mXv3LpW0aRt5KyQq", "npm_install_cache"),
    Rule("slack-webhook", r"hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]{20,}", ("hooks.slack.com/",),
         "https://hooks.slack.com/services/T0AAAAAAA/B0BBBBBBB/XXXXXXXXXXXXXXXXXXXXXXXX", "hooks.slack.com/"),
    Rule("slack", r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}", ("xox",), "xoxb-123456789012-abcdefGHIJ", "xox-a"),
    Rule("jwt", r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", ("eyj",),
         "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
         "eyJ.not.a.jwt"),
    Rule("private-key", r"-----BEGIN [A-Z ]{0,20}PRIVATE KEY-----[A-Za-z0-9+/=\s:,]{0,8000}(?:-----END [A-Z ]{0,20}PRIVATE KEY-----)?",
         ("-----begin ",),
         "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "-----BEGIN CERTIFICATE-----"),
)
_COMPILED = tuple((rule, re.compile(rule.pattern)) for rule in RULES)
_RUN40 = re.compile(rf"[{_B64}]{{40}}")
_B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")

# key=VALUE, "token": "VALUE", Authorization: Bearer VALUE. The keyword may end a longer name
# (HF_TOKEN, aws_secret_access_key) but not sit inside a word (monkey=); the value must look
# like a secret (see _assignment). Each pattern starts with a literal or a keyword so that the
# regex engine skips ahead; the triggers gate them.
_KEYWORDS = ("key", "token", "secret", "passw", "passphrase", "auth", "credential", "signature")
_ASSIGN = re.compile(
    r"(?i)(?P<k>api[_-]?key|apikey|access[_-]?key|secret|token|passw(?:or)?d|passphrase|"
    r"authorization|auth|credentials?|signature|key)s?"
    r"(?P<sep>[\"']?[ \t]{0,3}(?:=|:|=>)[ \t]{0,3}[\"']?(?:(?:bearer|basic|token)[ \t]{1,3})?)"
    r"(?P<v>[^\s\"'`,;&|<>()\[\]{}]{4,})"
)
# A command-line flag naming a secret, then its value: `--hf-token hf_...`, `--db-password=x`
# (entrypoints, process titles). Anchored at `--`.
_FLAG = re.compile(
    r"--[A-Za-z0-9_-]{0,40}?(?P<k>api[_-]?key|key|token|secret|passw(?:or)?d|passphrase|credentials?|auth)"
    r"[ =](?P<v>[^\s\"'`,;&|<>()\[\]{}]{4,})"
)
# Whether any check below could match at all (most strings: no).
_ALL_TRIGGERS = tuple(sorted({t for r in RULES for t in r.triggers} | set(_KEYWORDS)
                             | {"://", "bearer", "basic", "sig=", "code="}))
_BEARER = re.compile(r"(?i)(?P<k>bearer|basic)[ \t]{1,3}(?P<v>[A-Za-z0-9._~+/=-]{8,})")
# scheme://user:password@host
_URL_USERINFO = re.compile(r"(?P<pre>://[^\s/@:\"'<>]{0,256}:)(?P<v>[^\s/@\"'<>]{1,256})(?=@)")
# ?X-Amz-Signature=...&sig=...: query parameters that carry credentials.
_URL_PARAM = re.compile(
    r"(?i)(?P<pre>[?&;](?:x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|"
    r"x-goog-credential|sig|signature|token|access_token|id_token|refresh_token|api_key|apikey|key|"
    r"password|client_secret|code)=)(?P<v>[^&\s\"'<>#]+)"
)
_PASSWORDISH = ("secret", "passw", "passphrase", "credential", "auth", "token", "signature")


def _looks_secret(value: str, keyword: str) -> bool:
    """A value after a secret word: a password-like word takes any value of 4+ characters; `key`
    and the rest need a long or digit-bearing run (not `key=lambda`, `key: value`)."""
    if value.startswith(("$", "%", "*", "/")) or REDACTED in value or value.isdigit() \
            or value.lower() in ("bearer", "basic", "token"):
        return False
    word = keyword.lower()
    if any(w in word for w in _PASSWORDISH):
        return len(value) >= 4 and not _PLAIN_VALUE.match(value) and not _is_code(value)
    return (len(value) >= 16 or (len(value) >= 8 and any(c.isdigit() for c in value))) and not _is_code(value)


_CODE_LIKE = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*\.){1,6}[A-Za-z_][A-Za-z0-9_]*$|^self\.|^os\.|^None$")


def _is_code(value: str) -> bool:
    """`os.environ`, `self.token`, `cfg.api_key`: code that names a secret, not the secret."""
    return bool(_CODE_LIKE.match(value)) and not any(c.isdigit() for c in value)


class Redactor:
    """The token rules plus the secret values learnt so far (thread-safe, grows only)."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._ordered: tuple[str, ...] = ()  # longest first
        self._lock = threading.Lock()
        # Short strings repeat across State API rows (states, names, event kinds): remembered.
        self._cache: dict[str, str] = {}
        self._digests: dict[str, set[str]] = {}  # salt -> digests of values learnt elsewhere

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (shipped to a node inside the node probe): the rules only. The secret values
        learnt here never leave this machine, and a lock does not travel."""
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        Redactor.__init__(self)

    def learn(self, values: Iterable[str]) -> None:
        """Redact these exact strings wherever they appear from now on."""
        fresh = {v for v in values if isinstance(v, str) and worth_learning(v)} - self._values
        if not fresh:
            return
        with self._lock:
            self._values |= fresh
            self._ordered = tuple(sorted(self._values, key=len, reverse=True))
            self._cache = {}

    def learn_env(self, env: Mapping[str, Any] | None) -> None:
        """Learn every value held under a secret-looking name (an environ, runtime_env env_vars)."""
        if isinstance(env, Mapping):
            self.learn(str(v) for k, v in env.items() if isinstance(k, str) and SECRET_NAME.search(k)
                       and isinstance(v, (str, int)))

    def learn_rows(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Learn the secret env_vars of State API / Job API rows: a job's `runtime_env`, an
        actor's `serialized_runtime_env`, a task's `runtime_env_info.serialized_runtime_env`."""
        for row in rows:
            info = row.get("runtime_env_info")
            for raw in (row.get("runtime_env"), row.get("serialized_runtime_env"),
                        info.get("serialized_runtime_env") if isinstance(info, Mapping) else None):
                self.learn_env(_env_vars(raw))

    def _by_digest(self, m: re.Match[str]) -> str:
        word = m[0]
        for salt, known in self._digests.items():
            if _digest(salt, word) in known:
                return REDACTED
        return word

    @property
    def learnt(self) -> int:
        return len(self._values) + sum(len(d) for d in self._digests.values())

    def digests(self) -> dict[str, Any]:
        """The learnt values as salted SHA-256 digests ({"salt", "digests"}), for another process
        to redact them without ever holding them (see learn_digests)."""
        salt = secrets.token_hex(16)
        return {"salt": salt, "digests": sorted(_digest(salt, v) for v in self._values)}

    def learn_digests(self, found: Mapping[str, Any] | None) -> None:
        """Redact every word whose salted digest is one of these (what `digests()` gave): a
        secret value seen in a target's environment on a node, known here only by its digest."""
        if not isinstance(found, Mapping) or not found.get("digests"):
            return
        with self._lock:
            self._digests.setdefault(str(found.get("salt") or ""), set()).update(str(d) for d in found["digests"])
            self._cache = {}

    def redact(self, text: str) -> str:
        """`text` with every secret replaced by [REDACTED]; linear in len(text).

        Each check runs only when a literal it needs is in the text (`in` on str runs at memory
        speed): most strings (ids, states, names) cost a lower() and a few substring tests.
        """
        if len(text) < MIN_SECRET_TEXT:
            return text
        if len(text) <= CACHED_LENGTH:
            done = self._cache.get(text)
            if done is None:
                done = self._redact(text)
                if len(self._cache) >= CACHE_SIZE:
                    self._cache = {}
                self._cache[text] = done
            return done
        return self._redact(text)

    def _redact(self, text: str) -> str:
        for value in self._ordered:
            if value in text:
                text = text.replace(value, REDACTED)
        if self._digests:
            text = _WORD.sub(self._by_digest, text)
        low = text.lower()
        if not _may_match(text, low):
            return text  # nothing any rule could match: ids, states, names, most lines
        for rule, pattern in _COMPILED:
            if rule.triggers:
                text, low = _sub_at(text, low, rule.triggers, pattern, _whole)
            elif len(text) >= 40:
                text = pattern.sub(_aws_secret, text)
                low = text.lower()
        if "@" in text:
            text, low = _sub_at(text, low, ("://",), _URL_USERINFO, _userinfo)
        if "=" in text and ("?" in text or "&" in text or ";" in text):
            text = _URL_PARAM.sub(lambda m: m["pre"] + REDACTED, text)
            low = text.lower()
        if "--" in text:
            text, low = _sub_at(text, low, ("--",), _FLAG, _flag)
        if "=" in text or ":" in text:
            text, low = _sub_at(text, low, _KEYWORDS, _ASSIGN, _assignment)
        text, low = _sub_at(text, low, ("bearer", "basic"), _BEARER, _bearer)
        return text

    def redact_obj(self, obj: Any, share: bool = False) -> Any:
        """A JSON-able structure with every string redacted, and the value of every secret-named
        key replaced (`{"AWS_SECRET_ACCESS_KEY": "..."}`); control characters removed.

        Each distinct string and key is redacted once per call (stacks repeat the same frame
        strings thousands of times; redaction is a pure function of the string while nothing is
        learnt, and the memo lives only for this call). Linear in the size of `obj`. With
        `share`, a dict or list in which nothing was redacted is returned as it is, not copied
        (for a caller that only serialises the result: the writer)."""
        return _Walk(self, share).value(obj)

    def _redact_value(self, obj: Any) -> Any:
        """What `redact_obj` gives for one value outside a dict, list or tuple."""
        if isinstance(obj, str):
            return self.redact(strip_controls(obj))
        if obj is None or isinstance(obj, (bool, int, float)):
            return obj
        return self.redact(strip_controls(str(obj)))  # what json.dumps(default=str) would write


def _secret_value(value: Any) -> bool:
    """The value under a secret-named key is replaced: a non-empty, not plain scalar."""
    return isinstance(value, (str, int, float)) and not isinstance(value, bool) and bool(str(value)) \
        and not _PLAIN_VALUE.match(str(value))


class _Walk:
    """One `redact_obj` pass: every distinct string and key looked at once (memoised).

    Exact dicts, lists and strings (what json.loads and the model's to_dict build) take the
    fast path; any other Mapping, sequence or scalar goes through the same rules the slow way.
    With `share`, a dict or list is copied only from its first redacted entry on (copy on write)."""

    def __init__(self, redactor: Redactor, share: bool) -> None:
        self.redactor = redactor
        self.share = share
        self.strings: dict[str, str] = {}
        self.keys: dict[str, tuple[str, bool]] = {}

    def string(self, text: str) -> str:
        done = self.strings.get(text)
        if done is None:
            done = self.strings[text] = self.redactor.redact(strip_controls(text))
        return done

    def key(self, key: str) -> tuple[str, bool]:
        """The key as written (redacted) and whether it names a secret."""
        done = self.keys.get(key)
        if done is None:
            done = self.keys[key] = (self.redactor.redact(strip_controls(key)), SECRET_NAME.search(key) is not None)
        return done

    def value(self, obj: Any) -> Any:
        kind = type(obj)
        if kind is str:
            done = self.strings.get(obj)
            return self.string(obj) if done is None else done
        if kind is dict:
            return self.mapping(obj)
        if kind is list or kind is tuple:
            return self.sequence(obj)
        if isinstance(obj, str):  # a str subclass (an enum): its own text, not memoised
            return self.redactor._redact_value(obj)
        if isinstance(obj, Mapping):
            return self.mapping(obj)
        if isinstance(obj, (list, tuple)):
            return self.sequence(obj)
        return self.redactor._redact_value(obj)

    def mapping(self, obj: Mapping[Any, Any]) -> dict[Any, Any]:
        """`obj` redacted: a new dict, or `obj` itself when sharing and nothing changed."""
        out: dict[Any, Any] | None = None if self.share and type(obj) is dict else {}
        same = 0  # entries of obj left as they were, before the first change
        strings, keys = self.strings, self.keys
        for key, value in obj.items():
            if type(key) is str:
                named = keys.get(key)
                name, secret = self.key(key) if named is None else named
            elif isinstance(key, str):  # a str subclass: the same rules, not memoised
                name, secret = self.redactor.redact(strip_controls(key)), SECRET_NAME.search(key) is not None
            else:
                name, secret = key, False
            kind = type(value)
            if secret and _secret_value(value):
                new: Any = REDACTED
            elif kind is str:
                new = strings.get(value)
                if new is None:
                    new = self.string(value)
            elif value is None or kind is int or kind is bool or kind is float:
                new = value
            else:
                new = self.value(value)
            if out is None:
                if (new is value or (kind is str and new == value)) and (name is key or name == key):
                    same += 1
                    continue
                out = dict(islice(obj.items(), same))
            out[name] = new
        return obj if out is None else out  # type: ignore[return-value]

    def sequence(self, obj: list[Any] | tuple[Any, ...]) -> list[Any] | tuple[Any, ...]:
        """`obj` redacted: a new list, or `obj` itself when sharing and nothing changed."""
        out: list[Any] | None = None if self.share else []
        strings = self.strings
        for i, value in enumerate(obj):
            kind = type(value)
            if kind is str:
                new = strings.get(value)
                if new is None:
                    new = self.string(value)
            elif value is None or kind is int or kind is bool or kind is float:
                new = value
            else:
                new = self.value(value)
            if out is None:
                if new is value or (kind is str and new == value):
                    continue
                out = list(obj[:i])
            out.append(new)
        return obj if out is None else out


DISTINCT_LINES_FROM = 1 << 16  # text this long is pre-checked on its distinct lines


def _may_match(text: str, low: str) -> bool:
    """Whether any rule could match `text` (`low` is text.lower()): a trigger literal occurs, or a
    40-character base64 run. Neither spans a newline, so long text (05_stacks.txt repeats each
    frame line thousands of times) is checked on its distinct lines, joined: the same answer."""
    if len(text) >= DISTINCT_LINES_FROM:
        text = "\n".join(set(text.split("\n")))
        low = text.lower()
    return any(t in low for t in _ALL_TRIGGERS) or (len(text) >= 40 and _RUN40.search(text) is not None)


def _sub_at(text: str, low: str, triggers: tuple[str, ...], pattern: re.Pattern[str],
            repl: Callable[[re.Match[str]], str]) -> tuple[str, str]:
    """`pattern.sub(repl, text)`, tried only where a trigger occurs (found in `low`, text.lower(),
    at memory speed): each pattern starts with its trigger, so it is matched there and nowhere
    else. Linear; returns the new text and its lower-case form."""
    if len(low) != len(text):  # lower() changed the length (rare Unicode): scan the plain way
        new = pattern.sub(repl, text)
        return new, new.lower()
    starts: set[int] = set()
    for trigger in triggers:
        at = low.find(trigger)
        while at >= 0:
            starts.add(at)
            at = low.find(trigger, at + 1)
    if not starts:
        return text, low
    parts: list[str] = []
    last = 0
    for at in sorted(starts):
        if at < last:
            continue
        m = pattern.match(text, at)
        if m is None or m.end() == at:
            continue
        parts += [text[last:at], repl(m)]
        last = m.end()
    if not parts:
        return text, low
    parts.append(text[last:])
    new = "".join(parts)
    return new, new.lower()


def _whole(m: re.Match[str]) -> str:
    return REDACTED


def _userinfo(m: re.Match[str]) -> str:
    return m["pre"] + REDACTED


def _inside_word(m: re.Match[str]) -> bool:
    """The keyword continues a word (`monkey=`): not a secret's name."""
    start = m.start()
    return start > 0 and m.string[start - 1].isalpha()


def _assignment(m: re.Match[str]) -> str:
    if _inside_word(m) or not _looks_secret(m["v"], m["k"]):
        return m[0]
    return m[0][: m.start("v") - m.start()] + REDACTED


def _flag(m: re.Match[str]) -> str:
    if not _looks_secret(m["v"], m["k"]) or m["v"].startswith("-"):
        return m[0]
    return m[0][: m.start("v") - m.start()] + REDACTED


def _bearer(m: re.Match[str]) -> str:
    if _inside_word(m) or not _looks_secret(m["v"], "token"):
        return m[0]
    return f"{m['k']} {REDACTED}"


def _aws_secret(m: re.Match[str]) -> str:
    """A 40-character run is an AWS secret key when it stands alone (no base64 character on
    either side) and mixes upper case, lower case and digits."""
    text, start, end = m.string, m.start(), m.end()
    if (start > 0 and text[start - 1] in _B64_CHARS) or (end < len(text) and text[end] in _B64_CHARS):
        return m[0]
    run = m[0]
    if any(c.isupper() for c in run) and any(c.islower() for c in run) and any(c.isdigit() for c in run):
        return REDACTED
    return m[0]


# A word that may be a whole secret value: what sits between quotes, spaces, `=`, `:`, `@`, `/`,
# `,`, `;`, brackets (a value holding one of these is found only when learnt literally).
_WORD = re.compile(r"[^\s\"'`=:,;()\[\]{}<>@/&?|]{6,256}")


def _digest(salt: str, value: str) -> str:
    return hashlib.sha256(f"{salt}\0{value}".encode("utf-8", "surrogatepass")).hexdigest()


def worth_learning(value: str) -> bool:
    """A learnt value is redacted everywhere: skip ones so plain they would blank the report, and
    absolute paths (GOOGLE_APPLICATION_CREDENTIALS names a key file; it is not the key)."""
    return (len(value) >= MIN_LEARNT_LENGTH and not _PLAIN_VALUE.match(value) and value != REDACTED
            and not (value.startswith("/") and " " not in value))


DEFAULT = Redactor()


def redact(text: str) -> str:
    """Redact with the process-wide redactor (token rules + every value learnt so far)."""
    return DEFAULT.redact(text)


def redact_obj(obj: Any, share: bool = False) -> Any:
    """`Redactor.redact_obj` with the process-wide redactor."""
    return DEFAULT.redact_obj(obj, share)


def learn_env(env: Mapping[str, Any] | None) -> None:
    DEFAULT.learn_env(env)


def learn(values: Iterable[str]) -> None:
    DEFAULT.learn(values)


def learn_digests(found: Mapping[str, Any] | None) -> None:
    DEFAULT.learn_digests(found)


def learn_runtime_envs(rows: Iterable[Mapping[str, Any]]) -> None:
    DEFAULT.learn_rows(rows)


def _env_vars(raw: Any) -> Mapping[str, Any] | None:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    if isinstance(raw, Mapping):
        env = raw.get("env_vars")
        return env if isinstance(env, Mapping) else None
    return None


def safe_text(text: object, newlines: bool = True) -> str:
    """Untrusted text made safe for a terminal or a file: controls stripped, secrets redacted."""
    return redact(strip_controls(str(text), newlines))
