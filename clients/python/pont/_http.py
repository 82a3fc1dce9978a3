"""The HTTP side: kept-alive connections, credentials on every attempt, safe retries, and the error mapping.

Retries (the same rule in the TypeScript and PHP libraries): only a request that is safe to repeat is repeated:
GET and HEAD, and any other method when it carries an Idempotency-Key (the library adds one to creating calls;
``idempotency_key=`` sets it on any call). It is repeated after no answer (a lost connection, a timeout), 429
and 500/502/503/504, at most ``max_retries`` times, after ``random() * min(max_backoff, backoff * 2**attempt)``
seconds (full jitter), or exactly the server's Retry-After when it says one (up to 60 s; a longer one is not
waited for: the error is raised with its ``retry_after``). No attempt starts after the call's ``deadline``.

Cancellation (``cancel=``, a ``threading.Event`` set from another thread; ``signal`` in TypeScript, a callable in PHP):
no attempt starts once it is set, the wait between attempts ends at once, and the attempt in flight is aborted (its
socket shut down, its connection discarded); the call raises CancelledError.
"""
from __future__ import annotations

import http.client
import io
import json
import random as _random
import select
import socket
import threading
import time
import urllib.parse
import uuid
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple, TypedDict

from .errors import (MAX_RETRY_AFTER, AuthenticationError, BuiltinTimeoutError, CancelledError, NetworkError, ServerError,
                     PontError, TimeoutError, ValidationError, error_for, retry_after_of)

VERSION = "0.2.0"
USER_AGENT = f"pont-python/{VERSION}"
REFRESH_BEFORE_SECONDS = 60
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
SAFE_METHODS = frozenset({"GET", "HEAD"})


class RequestOptions(TypedDict, total=False):
    """Per-call options, as keyword arguments of every method (``pont.fhir.delete("Patient", id, timeout=5)``)."""
    idempotency_key: str       # sent as Idempotency-Key (and makes the call retryable); reuse it when re-running a job
    timeout: float             # seconds per attempt (after the connection is made)
    deadline: float            # seconds for the whole call, retries and waits included
    max_retries: int           # 0: one attempt
    headers: Mapping[str, str]  # extra headers
    purpose_of_use: str        # X-Purpose-Of-Use
    emergency_reason: str      # X-Emergency-Reason: break-glass (needs the scope emergency:access)
    cancel: threading.Event    # set it (from another thread) to cancel the call and its retries: CancelledError


OPTION_NAMES = frozenset(RequestOptions.__annotations__)


class RequestInfo(NamedTuple):
    """What a request hook sees (the Authorization and agent key headers are masked)."""
    method: str
    url: str
    headers: Dict[str, str]
    attempt: int


class ResponseInfo(NamedTuple):
    """What a response hook sees: ``status`` is None when no answer came (``error`` says why)."""
    method: str
    url: str
    status: Optional[int]
    headers: Dict[str, str]
    request_id: Optional[str]
    attempt: int
    elapsed: float
    error: Optional[PontError]


class ApiDict(dict):
    """A JSON object the server answered, with the answer's ``request_id``, ``status`` and ``headers``."""
    request_id: Optional[str] = None
    status: Optional[int] = None
    headers: Dict[str, str] = {}


class ApiList(list):
    """A JSON array the server answered, with ``request_id``, ``status`` and ``headers``."""
    request_id: Optional[str] = None
    status: Optional[int] = None
    headers: Dict[str, str] = {}


# (method, url, headers, body, connect timeout, timeout) -> (status, lower-cased headers, body bytes).
# Raises the builtin TimeoutError (socket.timeout) or another OSError / http.client.HTTPException when no answer came.
Sender = Callable[[str, str, Dict[str, str], Optional[bytes], float, float], Tuple[int, Dict[str, str], bytes]]


class _Watch:
    """Cancellation of the attempt in flight: a helper thread that, once ``cancel`` is set, shuts the connection's
    socket down, so the read blocked in the calling thread ends at once (``threading.Event`` has no callback: the
    helper waits on it in short slices, and ends within one slice after the attempt does)."""

    SLICE = 0.02

    def __init__(self, cancel: threading.Event, conn: http.client.HTTPConnection) -> None:
        self._cancel = cancel
        self._conn = conn
        self._lock = threading.Lock()
        self._done = False
        self._aborted = False
        threading.Thread(target=self._run, name="pont-cancel", daemon=True).start()

    def _run(self) -> None:
        while not self._cancel.wait(self.SLICE):
            if self._done:
                return
        with self._lock:
            if self._done:
                return
            self._aborted = True
            sock = self._conn.sock
            if sock is not None:
                try:  # the plain socket's shutdown, also under TLS: the SSL object is left to the reading thread
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
                except OSError:
                    pass

    def finish(self) -> bool:
        """Stops watching; True when the socket was shut down (the connection must then be discarded)."""
        with self._lock:
            self._done = True
            return self._aborted


class ConnectionPool:
    """Kept-alive ``http.client`` connections, per scheme, host and port. Thread-safe: a connection serves one
    request at a time (taken from the idle list, put back once its answer is read), so threads may share a client."""

    IDLE_SECONDS = 4.0  # below Node's 5 s keep-alive timeout: never reuse a connection the server is closing

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._idle: Dict[Tuple[str, str, int], List[Tuple[http.client.HTTPConnection, float]]] = {}
        self._lock = threading.Lock()
        self._clock = clock
        self.opened = 0  # connections made so far (tests check reuse)

    def _take(self, key: Tuple[str, str, int]) -> Optional[http.client.HTTPConnection]:
        with self._lock:
            idle = self._idle.get(key, [])
            while idle:
                conn, since = idle.pop()
                # A socket readable while idle was closed by the server (or holds garbage): not reused.
                if self._clock() - since < self.IDLE_SECONDS and conn.sock is not None and not select.select([conn.sock], [], [], 0)[0]:
                    return conn
                conn.close()
        return None

    def _give(self, key: Tuple[str, str, int], conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.setdefault(key, []).append((conn, self._clock()))

    def send(self, method: str, url: str, headers: Dict[str, str], body: Optional[bytes], connect_timeout: float,
             timeout: float, fresh: bool = False, stream: bool = False,
             cancel: Optional[threading.Event] = None) -> Tuple[int, Dict[str, str], Any]:
        """One request; ``fresh``: on a new connection (a request that may not be repeated: on a kept-alive one that
        the server closed meanwhile, it would fail unsent, indistinguishable from a lost answer). ``stream``: a 2xx
        answer is returned unread (the HTTPResponse; its connection closes with it and is not reused). ``cancel``:
        once set, the socket is shut down and ConnectionAbortedError raised (the connection is never reused)."""
        parts = urllib.parse.urlsplit(url)
        https = parts.scheme == "https"
        key = (parts.scheme, parts.hostname or "", parts.port or (443 if https else 80))
        conn = None if fresh else self._take(key)
        if conn is None:
            cls = http.client.HTTPSConnection if https else http.client.HTTPConnection
            conn = cls(key[1], key[2], timeout=connect_timeout)
            conn.connect()
            self.opened += 1
        watch = _Watch(cancel, conn) if cancel is not None else None
        try:
            conn.sock.settimeout(timeout)
            conn.request(method, (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), body=body, headers=headers)
            res = conn.getresponse()
            if stream and 200 <= res.status < 300:
                # The body is the caller's to read (or close): the cancellation ends with the answer's head.
                if watch is not None and watch.finish():
                    raise ConnectionAbortedError("cancelled")
                return res.status, {k.lower(): v for k, v in res.getheaders()}, _Stream(res, conn)
            raw = res.read()
            if watch is not None and watch.finish():  # shut down meanwhile: the body may be cut short
                raise ConnectionAbortedError("cancelled")
        except BaseException:
            if watch is not None:
                watch.finish()
            conn.close()
            raise
        if res.will_close:
            conn.close()
        else:
            self._give(key, conn)
        return res.status, {k.lower(): v for k, v in res.getheaders()}, raw

    def close(self) -> None:
        with self._lock:
            for idle in self._idle.values():
                for conn, _ in idle:
                    conn.close()
            self._idle.clear()


class _Stream:
    """An answer read by the caller, line by line: closing it closes its connection (never put back in the pool)."""

    def __init__(self, response: http.client.HTTPResponse, conn: http.client.HTTPConnection) -> None:
        self._response = response
        self._conn = conn

    def __iter__(self):
        return iter(self._response)

    def close(self) -> None:
        self._response.close()
        self._conn.close()


def _clean_header(name: str, value: Any) -> str:
    text = str(value)
    if "\r" in text or "\n" in text or "\r" in name or "\n" in name:
        raise ValidationError(f"header {name}: line breaks are not allowed")
    return text


# Credentials for one attempt: (force a fresh one) -> headers. Raising PontError stops the call. A callable whose
# ``renewable`` attribute is False (a patient's token) gets no second try after a 401.
Credentials = Callable[[bool], Dict[str, str]]


class Transport:
    def __init__(self, base_url: str, credentials: Optional[Credentials] = None, *, max_retries: int = 3,
                 timeout: float = 30.0, connect_timeout: float = 10.0, deadline: float = 120.0, backoff: float = 0.5,
                 max_backoff: float = 8.0, sender: Optional[Sender] = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, random: Callable[[], float] = _random.random,
                 wall_clock: Callable[[], float] = time.time,
                 on_request: Optional[Callable[[RequestInfo], None]] = None,
                 on_response: Optional[Callable[[ResponseInfo], None]] = None, user_agent: str = USER_AGENT) -> None:
        self.base_url = base_url.rstrip("/")
        self.credentials = credentials
        self.max_retries = max_retries
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.deadline = deadline
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.pool = ConnectionPool(clock)
        self._sender = sender
        self.sleep = sleep
        self.clock = clock
        self.random = random
        self.wall_clock = wall_clock
        self.on_request = on_request
        self.on_response = on_response
        self.user_agent = user_agent

    def url(self, path: str, query: Optional[Mapping[str, Any]] = None) -> str:
        url = self.base_url + path
        pairs = []
        for k, v in (query or {}).items():
            for item in (v if isinstance(v, (list, tuple)) else [v]):
                if item is not None:
                    pairs.append((k, str(item).lower() if isinstance(item, bool) else str(item)))
        return url + ("?" + urllib.parse.urlencode(pairs) if pairs else "")

    def same_origin(self, link: str) -> str:
        """A link the server gave (a next page): its path and query on our base URL, so credentials never leave it."""
        parts = urllib.parse.urlsplit(link)
        base_path = urllib.parse.urlsplit(self.base_url).path
        path = parts.path if parts.path.startswith(base_path) else base_path + parts.path
        return urllib.parse.urlunsplit(urllib.parse.urlsplit(self.base_url)._replace(path=path, query=parts.query))

    def request(self, method: str, path: str = "", *, query: Optional[Mapping[str, Any]] = None, body: Any = None,
                raw_body: Optional[bytes] = None, content_type: str = "application/json", create: bool = False,
                options: Optional[Mapping[str, Any]] = None, url: Optional[str] = None, auth: bool = True,
                accept: str = "application/json", repeatable: Optional[bool] = None, stream: bool = False) -> Any:
        """One call: ``create`` adds an Idempotency-Key (unless the options give one). ``repeatable`` overrides the
        method's rule when no key is sent: True for a POST with no effect (the token, introspection, a search),
        False for a GET that starts a job. ``stream``: a 2xx answer is the open response (file-like, iterating
        lines), read by the caller; ``options`` are RequestOptions."""
        options = dict(options or {})
        unknown = set(options) - OPTION_NAMES
        if unknown:
            raise ValidationError(f"unknown option(s): {', '.join(sorted(unknown))}")
        cancel = options.get("cancel")
        if cancel is not None and not (callable(getattr(cancel, "is_set", None)) and callable(getattr(cancel, "wait", None))):
            raise ValidationError("cancel must be a threading.Event")
        headers = {"Accept": accept, "User-Agent": self.user_agent}
        data = raw_body
        if body is not None and data is None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        if data is not None:
            headers["Content-Type"] = content_type
        key = options.get("idempotency_key") or (str(uuid.uuid4()) if create else None)
        if key:
            headers["Idempotency-Key"] = _clean_header("Idempotency-Key", key)
        if options.get("purpose_of_use"):
            headers["X-Purpose-Of-Use"] = _clean_header("X-Purpose-Of-Use", options["purpose_of_use"])
        if options.get("emergency_reason"):
            headers["X-Emergency-Reason"] = _clean_header("X-Emergency-Reason", options["emergency_reason"])
        for name, value in (options.get("headers") or {}).items():
            headers[name] = _clean_header(name, value)
        method = method.upper()
        retryable = bool(key) or (method in SAFE_METHODS if repeatable is None else repeatable)
        return self._send(method, url or self.url(path, query), headers, data, retryable, auth, options, stream)

    def _send(self, method: str, url: str, headers: Dict[str, str], data: Optional[bytes], retryable: bool, auth: bool,
              options: Mapping[str, Any], stream: bool = False) -> Any:
        max_retries = options.get("max_retries", self.max_retries)
        timeout = float(options.get("timeout", self.timeout))
        deadline = self.clock() + float(options.get("deadline", self.deadline))
        cancel: Optional[threading.Event] = options.get("cancel")
        refreshed = False
        attempt = 0
        while True:
            self._unless_cancelled(cancel, method, url, attempt)
            sent = dict(headers)
            if auth and self.credentials:
                sent.update(self.credentials(False))
                self._unless_cancelled(cancel, method, url, attempt)  # fetching a token took time
            remaining = deadline - self.clock()
            if remaining <= 0:
                raise TimeoutError(f"{method} {_path(url)}: no answer within the deadline ({attempt} attempts)")
            if self.on_request:
                self.on_request(RequestInfo(method, url, _masked(sent), attempt))
            started = self.clock()
            try:
                timeouts = (min(self.connect_timeout, remaining), min(timeout, remaining))
                if self._sender:
                    status, res_headers, raw = self._sender(method, url, sent, data, *timeouts)
                    if stream and isinstance(raw, bytes) and 200 <= status < 300:
                        raw = io.BytesIO(raw)
                else:
                    status, res_headers, raw = self.pool.send(method, url, sent, data, *timeouts, fresh=not retryable, stream=stream, cancel=cancel)
            except BuiltinTimeoutError:
                error: PontError = TimeoutError(f"{method} {_path(url)}: no answer within {min(timeout, remaining):g} s")
                status, res_headers, raw = None, {}, b""
            except (OSError, http.client.HTTPException) as err:
                error = NetworkError(f"{method} {_path(url)}: no answer ({type(err).__name__}: {err})")
                status, res_headers, raw = None, {}, b""
            if status is None and cancel is not None and cancel.is_set():  # aborted, or failed while cancelled anyway
                error = CancelledError(f"{method} {_path(url)}: cancelled during attempt {attempt}; the request may have taken effect")
                self._hook(method, url, status, res_headers, attempt, started, error)
                raise error
            if status is not None and not isinstance(raw, bytes):  # a stream being answered
                self._hook(method, url, status, res_headers, attempt, started, None)
                return raw
            if status is not None:
                error, result = _outcome(status, res_headers, raw)
                if error is None:
                    self._hook(method, url, status, res_headers, attempt, started, None)
                    return result
            self._hook(method, url, status, res_headers, attempt, started, error)
            if status == 401 and auth and self.credentials and not refreshed and getattr(self.credentials, "renewable", True):
                refreshed = True
                self.credentials(True)
                continue
            delay = self._delay(attempt, error, res_headers) if retryable and attempt < max_retries and (status is None or status in RETRY_STATUSES) else None
            if delay is None or self.clock() + delay >= deadline:
                raise error
            self._wait(delay, cancel)
            attempt += 1

    def _wait(self, seconds: float, cancel: Optional[threading.Event]) -> None:
        """The wait before a retry: with a ``cancel`` event and the real sleep, ``cancel.wait``, which ends as soon as
        the event is set (the next turn of the loop then raises); an injected ``sleep`` (tests) is called as it is."""
        if cancel is not None and self.sleep is time.sleep:
            cancel.wait(seconds)
        else:
            self.sleep(seconds)

    @staticmethod
    def _unless_cancelled(cancel: Optional[threading.Event], method: str, url: str, attempt: int) -> None:
        if cancel is not None and cancel.is_set():
            raise CancelledError(f"{method} {_path(url)}: cancelled before attempt {attempt}")

    def _delay(self, attempt: int, error: PontError, headers: Mapping[str, str]) -> Optional[float]:
        """Seconds before the next attempt, or None when the server asks for a longer wait than we honour."""
        retry_after = getattr(error, "retry_after", None)
        if retry_after is None and headers:
            retry_after = retry_after_of(None, headers, self.wall_clock())
        if retry_after is not None:
            return retry_after if retry_after <= MAX_RETRY_AFTER else None
        return self.random() * min(self.max_backoff, self.backoff * (2 ** attempt))

    def _hook(self, method: str, url: str, status: Optional[int], headers: Dict[str, str], attempt: int,
              started: float, error: Optional[PontError]) -> None:
        if self.on_response:
            self.on_response(ResponseInfo(method, url, status, headers, headers.get("x-request-id"), attempt, self.clock() - started, error))


def _path(url: str) -> str:
    return urllib.parse.urlsplit(url).path


def _masked(headers: Dict[str, str]) -> Dict[str, str]:
    return {k: ("***" if k.lower() in ("authorization", "x-bridge-agent-key") else v) for k, v in headers.items()}


def _outcome(status: int, headers: Dict[str, str], raw: bytes) -> Tuple[Optional[PontError], Any]:
    """(the error, None) or (None, the answer with its request id)."""
    text = raw.decode("utf-8", errors="replace")
    try:
        parsed: Any = json.loads(text) if text else None
        is_json = True
    except ValueError:
        parsed, is_json = text, False
    if not 200 <= status < 300:
        return error_for(status, parsed if is_json else text, headers), None
    if not is_json:
        return ServerError(f"HTTP {status}: the answer is not JSON", status=status, request_id=headers.get("x-request-id"), headers=headers), None
    result = ApiList(parsed) if isinstance(parsed, list) else ApiDict(parsed if isinstance(parsed, dict) else {})
    if parsed is not None and not isinstance(parsed, (dict, list)):
        result["value"] = parsed
    result.request_id, result.status, result.headers = headers.get("x-request-id"), status, headers
    return None, result


class ClientCredentials:
    """Tokens of a client (OAuth client credentials): fetched on first use, cached, refreshed 60 s before expiry
    (one refresh at a time across threads) and after a 401."""

    def __init__(self, transport: Transport, client_id: str, client_secret: str, wall_clock: Callable[[], float] = time.time) -> None:
        self._transport = transport
        self.client_id = client_id
        self._secret = client_secret
        self._token: Optional[Tuple[str, float]] = None
        self._lock = threading.Lock()
        self._now = wall_clock

    def use_secret(self, secret: str) -> None:
        with self._lock:
            self._secret = secret
            self._token = None

    def token_request(self, scope: Optional[str] = None) -> Dict[str, str]:
        """The token request's body."""
        body = {"grant_type": "client_credentials", "client_id": self.client_id, "client_secret": self._secret}
        return {**body, "scope": scope} if scope else body

    def __call__(self, force: bool) -> Dict[str, str]:
        with self._lock:
            if force or not self._token or self._now() >= self._token[1] - REFRESH_BEFORE_SECONDS:
                answer = self._transport.request("POST", "/api/v1/connect/auth/token", auth=False, repeatable=True, body=self.token_request())
                if not answer.get("access_token"):
                    raise AuthenticationError("The token endpoint answered without an access_token", request_id=answer.request_id)
                self._token = (answer["access_token"], self._now() + float(answer.get("expires_in", 3600)))
            return {"Authorization": "Bearer " + self._token[0]}
