"""The HTTP side: the token (fetched, cached, refreshed one at a time), retries, and the error mapping."""
import json
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from .errors import AuthenticationError, RateLimitError, ServerError, error_for

REFRESH_BEFORE_SECONDS = 60

# (method, url, headers, body bytes, timeout) -> (status, headers lower-cased, body bytes); raises OSError on no answer.
Sender = Callable[[str, str, Dict[str, str], Optional[bytes], float], Tuple[int, Dict[str, str], bytes]]


def urllib_sender(method: str, url: str, headers: Dict[str, str], body: Optional[bytes], timeout: float):
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as res:
            return res.status, {k.lower(): v for k, v in res.headers.items()}, res.read()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


class Transport:
    def __init__(self, client_id: str, client_secret: str, base_url: str, max_retries: int = 3,
                 timeout: float = 30.0, backoff: float = 0.5, sender: Optional[Sender] = None) -> None:
        self._client_id = client_id
        self._client_secret = client_secret
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.timeout = timeout
        self.backoff = backoff
        self._send_raw = sender or urllib_sender
        self._token: Optional[Tuple[str, float]] = None
        self._lock = threading.Lock()

    @property
    def client_id(self) -> str:
        return self._client_id

    def use_client_secret(self, secret: str) -> None:
        """After a rotation of the client's secret: later tokens are asked for with the new one."""
        with self._lock:
            self._client_secret = secret

    def access_token(self, force: bool = False) -> str:
        """A valid token: the cached one, or a new one (one refresh at a time across threads)."""
        with self._lock:
            if not force and self._token and time.time() < self._token[1] - REFRESH_BEFORE_SECONDS:
                return self._token[0]
            answer = self._send("POST", f"{self.base_url}/api/v1/connect/auth/token", {
                "grant_type": "client_credentials", "client_id": self._client_id, "client_secret": self._client_secret,
            }, idempotency_key=None, auth=False)
            if not isinstance(answer, dict) or not answer.get("access_token"):
                raise AuthenticationError("The token endpoint answered without an access_token")
            self._token = (answer["access_token"], time.time() + float(answer.get("expires_in", 3600)))
            return self._token[0]

    def request(self, method: str, path: str, query: Optional[Mapping[str, Any]] = None, body: Any = None,
                idempotent: bool = False, url: Optional[str] = None) -> Any:
        if url is None:
            url = self.base_url + path
            if query:
                pairs = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in query.items() if v is not None]
                if pairs:
                    url += "?" + urllib.parse.urlencode(pairs)
        return self._send(method, url, body, idempotency_key=str(uuid.uuid4()) if idempotent else None, auth=True)

    def _send(self, method: str, url: str, body: Any, idempotency_key: Optional[str], auth: bool) -> Any:
        refreshed = False
        attempt = 0
        while True:
            headers = {"Accept": "application/json"}
            data = None
            if body is not None:
                headers["Content-Type"] = "application/json"
                data = json.dumps(body).encode("utf-8")
            if idempotency_key:
                headers["Idempotency-Key"] = idempotency_key
            if auth:
                headers["Authorization"] = "Bearer " + self.access_token()
            try:
                status, res_headers, raw = self._send_raw(method, url, headers, data, self.timeout)
            except OSError as err:
                if attempt < self.max_retries:
                    self._sleep(attempt, None)
                    attempt += 1
                    continue
                path = urllib.parse.urlsplit(url).path
                raise ServerError(f"{method} {path}: no answer ({type(err).__name__}) after {attempt + 1} attempts") from None
            text = raw.decode("utf-8", errors="replace")
            try:
                parsed: Any = json.loads(text) if text else None
                is_json = True
            except ValueError:
                parsed, is_json = text, False
            if 200 <= status < 300:
                if not is_json:
                    raise ServerError(f"HTTP {status}: the answer is not JSON", status=status, request_id=res_headers.get("x-request-id"))
                return parsed
            error = error_for(status, parsed if is_json else text, res_headers)
            if status == 401 and auth and not refreshed:
                refreshed = True
                self.access_token(force=True)
                continue
            if (status == 429 or status >= 500) and attempt < self.max_retries:
                self._sleep(attempt, error.retry_after if isinstance(error, RateLimitError) else None)
                attempt += 1
                continue
            raise error

    def _sleep(self, attempt: int, retry_after: Optional[float]) -> None:
        time.sleep(retry_after if retry_after is not None else self.backoff * (2 ** attempt) * (0.5 + random.random()))
