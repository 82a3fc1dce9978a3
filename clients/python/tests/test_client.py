"""The conformance suite (clients/conformance) for the Python library, with unittest."""
import inspect
import json
import subprocess
import sys
import threading
import time
import tracemalloc
import unittest
import urllib.request
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import urlsplit

import pont
from pont import BridgeAgent, PatientApp, Pont, webhooks
from pont._http import Transport

CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance"
VECTORS = json.loads((CONFORMANCE / "vectors.json").read_text(encoding="utf-8"))
SURFACE = json.loads((CONFORMANCE / "surface.json").read_text(encoding="utf-8"))["operations"]
LIBRARY = json.loads((CONFORMANCE / "surface.json").read_text(encoding="utf-8"))["library"]


class FakeServer:
    """A sender that answers the token endpoint and then each of ``answers`` in turn: (status, headers, body), or an
    exception to raise (no answer). Records every other request."""

    def __init__(self, answers=(), token_expires=3600):
        self.answers = list(answers)
        self.calls = []
        self.tokens = 0
        self.token_expires = token_expires

    def __call__(self, method, url, headers, body, connect_timeout, timeout):
        if url.endswith("/auth/token"):
            self.tokens += 1
            expires = self.token_expires if self.tokens == 1 else 3600
            return 200, {}, json.dumps({"access_token": f"tok-{self.tokens}", "expires_in": expires}).encode()
        self.calls.append({"method": method, "url": url, "headers": dict(headers), "body": body, "timeout": timeout})
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        status, res_headers, res_body = answer
        raw = res_body if isinstance(res_body, str) else json.dumps(res_body)
        return status, {k.lower(): v for k, v in res_headers.items()}, raw.encode()


def client(server, **kw):
    kw.setdefault("sleep", lambda s: None)
    return Pont(client_id="cli_x", client_secret="pcs_x", base_url="http://pont.invalid", sender=server, **kw)


OK = (200, {"x-request-id": "req-ok"}, {"ok": True})


class Vectors(unittest.TestCase):
    def test_signatures(self):
        for v in VECTORS["signatures"]:
            with self.subTest(v["name"]):
                check = lambda: webhooks.verify_signature(v["raw_body"], v["header"], VECTORS["secret"], VECTORS["tolerance"], now=VECTORS["now"])
                if v["valid"]:
                    self.assertIs(check(), True)
                    event = webhooks.parse_event(v["raw_body"].encode("utf-8"), v["header"], VECTORS["secret"], VECTORS["tolerance"], now=VECTORS["now"])
                    self.assertEqual(event["type"], "lab_result.released")
                else:
                    self.assertRaises(pont.WebhookSignatureError, check)

    def test_error_answers(self):
        for v in VECTORS["errors"]:
            with self.subTest(v["name"]):
                p = client(FakeServer([(v["status"], v["headers"], v["body"])] * 2), max_retries=0)  # a 401: once more
                with self.assertRaises(getattr(pont, v["exception"])) as caught:
                    p.health_ids.verify("CM482930174629")
                error = caught.exception
                self.assertIsInstance(error, pont.PontError)
                self.assertEqual(error.status, v["status"])
                self.assertEqual(error.error_code, v["error_code"])
                self.assertEqual(error.request_id, v["headers"].get("x-request-id"))
                if "retry_after" in v:
                    self.assertEqual(error.retry_after, v["retry_after"])
                self.assertNotIn("pcs_x", str(error))

    def test_backoff_and_retry_after(self):
        retry = VECTORS["retry"]
        defaults = retry["defaults"]
        for v in retry["backoff"]:
            with self.subTest(v["name"]):
                headers = {"retry-after": v["retry_after"]} if v["retry_after"] is not None else {}
                error = pont.errors.error_for(503, {"status": "error"}, headers)
                bounds = []
                for r in (0.0, 0.999999):
                    t = Transport("http://x", random=lambda r=r: r, wall_clock=lambda: v.get("now", time.time()))
                    self.assertEqual((t.max_retries, t.backoff, t.max_backoff, t.timeout, t.deadline),
                                     (defaults["max_retries"], defaults["base_delay_ms"] / 1000, defaults["max_delay_ms"] / 1000,
                                      defaults["timeout_ms"] / 1000, defaults["deadline_ms"] / 1000))
                    bounds.append(t._delay(v["retry"] - 1, error, headers))
                if "deadline_remaining_ms" in v:  # through a call: the wait would pass the deadline
                    now = [0.0]
                    server = FakeServer([(503, headers, {"status": "error"}), OK])
                    p = client(server, clock=lambda: now[0], deadline=v["deadline_remaining_ms"] / 1000)
                    self.assertRaises(pont.ServerError, p.health_ids.verify, "CM482930174629")
                    self.assertEqual(len(server.calls), 1)
                elif v["delay_ms"] is None:
                    self.assertEqual(bounds, [None, None])
                else:
                    low, high = (b * 1000 for b in bounds)
                    self.assertAlmostEqual(low, v["delay_ms"][0], delta=1)
                    self.assertAlmostEqual(high, v["delay_ms"][1], delta=1)

    def test_which_calls_are_retried(self):
        for v in VECTORS["retry"]["decisions"]:
            with self.subTest(f"{v['method']} key={v['idempotency_key']} {v['outcome']}"):
                outcome = v["outcome"]
                first = (ConnectionResetError("reset") if outcome == "network" else TimeoutError("timed out") if outcome == "timeout"
                         else (outcome, {}, {"status": "error", "error_code": "X", "message": "m"}))
                server = FakeServer([first, OK])
                p = client(server)
                options = {"idempotency_key": "k-1"} if v["idempotency_key"] else {}
                call = lambda: p._http.request(v["method"], "/api/fhir/R4/Patient/1", options=options)
                if v["retry"]:
                    self.assertEqual(call(), {"ok": True})
                    self.assertEqual(len(server.calls), 2)
                else:
                    expected = pont.TimeoutError if outcome == "timeout" else pont.NetworkError if outcome == "network" else pont.PontError
                    self.assertRaises(expected, call)
                    self.assertEqual(len(server.calls), 1)

    def test_key_by_default_and_calls_retried_like_get(self):
        server = FakeServer([(503, {}, "busy"), OK, (503, {}, "busy"), OK, (503, {}, "busy"), OK, (503, {}, "busy"), OK])
        p = client(server)
        p.records.push_encounter({"health_id": "CM482930174629", "encounter_type": "visit"})
        self.assertEqual(len({c["headers"]["Idempotency-Key"] for c in server.calls}), 1)
        uuid.UUID(server.calls[0]["headers"]["Idempotency-Key"], version=4)
        p.fhir.search_post("Observation", {"code": "x"})
        self.assertNotIn("Idempotency-Key", server.calls[-1]["headers"])
        self.assertEqual(server.calls[-1]["body"], b"code=x")
        agent = BridgeAgent(agent_id="agt_1", agent_key="k", facility_id="fac-1", base_url="http://pont.invalid", sender=server, sleep=lambda s: None)
        agent.heartbeat("1.0")
        agent.sync([{"resourceType": "Patient", "id": "p1"}, {"resourceType": "Encounter", "id": "e1"}], batch_id="batch-7", groups=[[0, 1]])
        self.assertEqual([c["headers"].get("Idempotency-Key") for c in server.calls[-4:]], [None, None, "batch-7", "batch-7"])
        self.assertEqual(json.loads(server.calls[-1]["body"])["groups"], [[0, 1]])
        self.assertEqual(len(server.calls), 8)

    def test_bulk_export_kick_off_poll_files_cancel(self):
        status_url = "http://pont.invalid/api/fhir/R4/$export-status/job%201"
        server = FakeServer([
            (503, {}, "busy"),  # a kick-off starts a job: not retried without the caller's key
            (202, {"content-location": status_url}, ""),
            (202, {"x-progress": "2 of 5 types", "retry-after": "3"}, ""),
            (200, {}, {"transactionTime": "t", "output": [{"type": "Patient", "url": "http://public.example/api/fhir/R4/$export-status/job1/file/1"}]}),
            (200, {}, '{"resourceType":"Patient","id":"a"}\n\n{"resourceType":"Patient","id":"b"}\n'),
            (202, {}, {"resourceType": "OperationOutcome", "issue": []}),
            (503, {}, "busy"), OK,  # $validate has no effect: retried like a GET
        ])
        p = client(server)
        self.assertRaises(pont.ServerError, p.bulk.export)
        self.assertEqual(len(server.calls), 1)
        job = p.bulk.export(level="group", group_id="g1", params={"_type": "Patient,Observation"})
        self.assertEqual((job["id"], job["status_url"], job.status), ("job 1", status_url, 202))
        sent = server.calls[1]
        self.assertEqual((sent["method"], sent["headers"]["Prefer"]), ("GET", "respond-async"))
        self.assertEqual(sent["url"], "http://pont.invalid/api/fhir/R4/Group/g1/$export?_type=Patient%2CObservation")
        self.assertEqual(p.bulk.status(job["id"]), {"status": "in-progress", "progress": "2 of 5 types", "retry_after": 3.0})
        done = p.bulk.status(job["id"])
        self.assertEqual(done["status"], "completed")
        self.assertEqual([r["id"] for r in p.bulk.file(done["manifest"]["output"][0]["url"])], ["a", "b"])
        self.assertEqual(server.calls[4]["url"], "http://pont.invalid/api/fhir/R4/$export-status/job1/file/1")  # on our base URL
        self.assertEqual(server.calls[4]["headers"]["Accept"], "application/fhir+ndjson")
        self.assertEqual(p.bulk.cancel(job["id"]).status, 202)
        self.assertEqual(server.calls[5]["method"], "DELETE")
        self.assertEqual(p.fhir.validate({"resourceType": "Patient"}, id="p1", mode="update"), {"ok": True})
        self.assertEqual(server.calls[-1]["url"], "http://pont.invalid/api/fhir/R4/Patient/p1/$validate?mode=update")
        with self.assertRaisesRegex(pont.ValidationError, "group_id is required"):
            p.bulk.export(level="group")

    def test_paging(self):
        for v in VECTORS["paging"]:
            with self.subTest(v["name"]):
                server = FakeServer([(200, {}, v["page"]), (200, {}, {"resourceType": "Bundle", "entry": [], "items": [], "deliveries": []})])
                p = client(server)
                if v["kind"] == "fhir":
                    page = p.fhir.search("Observation")
                    self.assertEqual([f"{r['resourceType']}/{r['id']}" for r in page.data], v["items"])
                elif v["kind"] == "cursor":
                    page = p.webhooks.deliveries()
                    self.assertEqual([d["id"] for d in page.data], v["items"])
                else:
                    page = p.inventory.pharmacy_stock()
                    self.assertEqual([d["id"] for d in page.data], v["items"])
                following = page.next_page()
                if v["next"] is None:
                    self.assertIsNone(following)
                    self.assertEqual(len(server.calls), 1)
                    continue
                sent = server.calls[1]["url"]
                if v["kind"] == "fhir":  # the next link's path and query, on our base URL (credentials stay there)
                    self.assertEqual(sent, "http://pont.invalid" + v["next"][len("http://x"):])
                else:
                    (name, value), = v["next"].items()
                    self.assertIn(f"{name}={value}", sent)

    def test_option_headers_and_user_agent(self):
        for v in VECTORS["options"]["headers"]:
            with self.subTest(v["option"]):
                server = FakeServer([OK])
                client(server).patients.get_summary("CM482930174629", **{v["option"]: v["value"]})
                self.assertEqual(server.calls[0]["headers"][v["header"]], v["value"])
                self.assertEqual(server.calls[0]["headers"]["User-Agent"], f"pont-python/{pont.__version__}")


class Behaviour(unittest.TestCase):
    def test_constructor_makes_no_request_and_token_errors_come_with_the_first_call(self):
        server = FakeServer()
        p = client(server)
        self.assertEqual((server.tokens, server.calls), (0, []))

        def refuse(method, url, headers, body, connect_timeout, timeout):
            return 401, {"x-request-id": "req-t"}, json.dumps({"status": "error", "error_code": "UNAUTHENTICATED", "message": "bad"}).encode()
        with self.assertRaises(pont.AuthenticationError) as caught:
            Pont(client_id="cli_x", client_secret="pcs_bad", base_url="http://pont.invalid", sender=refuse).webhooks.list()
        self.assertEqual(caught.exception.request_id, "req-t")

    def test_create_takes_what_the_constructor_takes(self):
        init = list(inspect.signature(Pont.__init__).parameters.values())[1:]  # without self
        self.assertEqual(list(inspect.signature(Pont.create).parameters.values()), init)

    def test_retries_keep_the_idempotency_key_and_refresh_the_token(self):
        server = FakeServer([
            (429, {}, {"status": "error", "error_code": "RATE_LIMITED", "message": "slow down", "retry_after": 0}),
            (503, {}, "<html>busy</html>"),
            (201, {"x-request-id": "req-201"}, {"lab_result_id": "x"}),
            (422, {}, {"status": "error", "error_code": "VALIDATION_FAILED", "message": "bad"}),
        ], token_expires=30)
        slept = []
        p = client(server, sleep=slept.append, random=lambda: 0.5)
        fields = {"health_id": "CM482930174629", "test_name": "K", "result_value": "4", "flagged": False}
        answer = p.records.push_lab_result(fields)
        self.assertEqual((answer, answer.request_id, answer.status), ({"lab_result_id": "x"}, "req-201", 201))
        self.assertEqual(slept, [0, 0.5])  # Retry-After 0, then half of the second retry's 1 s
        self.assertEqual(len({c["headers"]["Idempotency-Key"] for c in server.calls}), 1)
        with self.assertRaises(pont.ValidationError):
            p.records.push_lab_result(fields)
        self.assertEqual(len(server.calls), 4)  # a 422 is never retried
        # The first token expires within 60 s: the next attempt fetched a new one.
        self.assertEqual([c["headers"]["Authorization"] for c in server.calls], ["Bearer tok-1"] + ["Bearer tok-2"] * 3)

    def test_a_401_gets_one_new_token_then_one_more_try(self):
        unauthenticated = (401, {}, {"status": "error", "error_code": "UNAUTHENTICATED", "message": "expired"})
        server = FakeServer([unauthenticated, OK, unauthenticated, unauthenticated])
        p = client(server)
        self.assertEqual(p.fhir.delete("Patient", "1"), {"ok": True})
        self.assertEqual([c["headers"]["Authorization"] for c in server.calls], ["Bearer tok-1", "Bearer tok-2"])
        self.assertRaises(pont.AuthenticationError, p.fhir.delete, "Patient", "1")
        self.assertEqual(server.tokens, 3)

    def test_per_call_options(self):
        server = FakeServer([(503, {}, "busy"), (503, {}, "busy"), OK])
        p = client(server)
        with self.assertRaises(pont.ServerError):
            p.health_ids.verify("CM482930174629", max_retries=1, timeout=2.5, headers={"X-Trace": "t-1"})
        self.assertEqual(len(server.calls), 2)
        self.assertEqual([c["timeout"] for c in server.calls], [2.5, 2.5])
        self.assertEqual(server.calls[0]["headers"]["X-Trace"], "t-1")
        with self.assertRaisesRegex(pont.ValidationError, "line breaks"):
            p.health_ids.verify("CM482930174629", headers={"X-Trace": "a\r\nX-Evil: 1"})
        with self.assertRaisesRegex(pont.ValidationError, "unknown option"):
            p.health_ids.verify("CM482930174629", retries=2)
        self.assertEqual(len(server.calls), 2)

    def test_an_attempt_never_outlives_the_deadline(self):
        now = [0.0]
        server = FakeServer([TimeoutError("timed out"), OK])

        def sleep(seconds):
            now[0] += seconds
        p = client(server, clock=lambda: now[0], sleep=sleep, random=lambda: 1.0, deadline=10, timeout=30)
        p.health_ids.verify("CM482930174629")
        self.assertEqual([c["timeout"] for c in server.calls], [10, 9.5])  # each attempt gets what is left

    def test_hooks_see_every_attempt_without_secrets(self):
        seen = []
        server = FakeServer([(503, {"x-request-id": "req-1"}, "busy"), (200, {"x-request-id": "req-2"}, {"ok": True})])
        p = client(server, on_request=lambda r: seen.append(("request", r.attempt, r.headers.get("Authorization"))),
                   on_response=lambda r: seen.append(("response", r.attempt, r.status, r.request_id, type(r.error).__name__)))
        p.webhooks.list()
        self.assertEqual(seen[:2], [("request", 0, None), ("response", 0, 200, None, "NoneType")])  # the token request
        del seen[:2]
        self.assertEqual(seen, [("request", 0, "***"), ("response", 0, 503, "req-1", "ServerError"),
                                ("request", 1, "***"), ("response", 1, 200, "req-2", "NoneType")])

    def test_next_tokens_use_the_rotated_secret(self):
        secrets_used = []

        def send(method, url, headers, body, connect_timeout, timeout):
            sent = json.loads(body or b"{}")
            if url.endswith("/auth/token"):
                secrets_used.append(sent["client_secret"])
                return 200, {}, json.dumps({"access_token": "t", "expires_in": 3600}).encode()
            if url.endswith("/api/v1/connect/auth/clients/cli_x/rotate-secret"):
                answer = {"client_id": "cli_x", "client_secret": "pcs_new", "previous_secret_expires_at": None, "overlap": sent.get("overlap_seconds")}
                return 200, {}, json.dumps(answer).encode()
            return 200, {}, b"{}"

        p = Pont(client_id="cli_x", client_secret="pcs_old", base_url="http://pont.invalid", sender=send)
        rotated = p.auth.rotate_client_secret(0)
        self.assertEqual((rotated["client_secret"], rotated["overlap"]), ("pcs_new", 0))
        p.webhooks.list()
        self.assertEqual(secrets_used, ["pcs_old", "pcs_new"])

    def test_missing_argument_fails_before_any_request(self):
        for bad in ("pont.example", "ftp://pont.example", "http://"):
            with self.assertRaisesRegex(pont.ValidationError, "base_url must be an http"):
                Pont(client_id="cli_x", client_secret="pcs_x", base_url=bad)
        server = FakeServer()
        p = client(server)
        with self.assertRaisesRegex(pont.ValidationError, "health_id is required"):
            p.patients.get_summary("")
        with self.assertRaisesRegex(pont.ValidationError, "test_name is required"):
            p.records.push_lab_result({"health_id": "CM482930174629"})
        self.assertEqual((server.tokens, server.calls), (0, []))

    def test_discovery_fetches_no_token_and_a_patient_app_sends_its_own(self):
        server = FakeServer([OK, OK, OK, (503, {}, {"status": "unavailable", "checks": {"database": "failing"}})])
        p = client(server)
        p.system.healthz()
        p.discovery.jwks()
        p.discovery.openapi()
        with self.assertRaises(pont.ServerError) as caught:
            p.system.readyz(max_retries=0)
        self.assertEqual(caught.exception.body["status"], "unavailable")
        self.assertEqual(server.tokens, 0)
        self.assertEqual([(c["url"], c["headers"].get("Authorization")) for c in server.calls],
                         [("http://pont.invalid/healthz", None), ("http://pont.invalid/.well-known/jwks.json", None),
                          ("http://pont.invalid/api/openapi.json", None), ("http://pont.invalid/readyz", None)])

        unauthenticated = (401, {}, {"status": "error", "error_code": "UNAUTHENTICATED", "message": "expired"})
        server = FakeServer([(503, {}, "busy"), (200, {}, {"items": []}), (503, {}, "busy"), unauthenticated])
        app = PatientApp(base_url="http://pont.invalid", token="pat_secret_value", sender=server, sleep=lambda s: None)
        self.assertNotIn("secret_value", repr(app))
        self.assertEqual(app.consents().data, [])  # a read: retried
        self.assertRaises(pont.ServerError, app.approve_request, "cr 1")  # a write without a key: once
        self.assertRaises(pont.AuthenticationError, app.access_log)  # a pat_ token is not renewed: once
        self.assertEqual([(c["method"], c["url"], c["headers"].get("Authorization"), c["headers"].get("Idempotency-Key")) for c in server.calls], [
            ("GET", "http://pont.invalid/api/v1/mobile/consents", "Bearer pat_secret_value", None),
            ("GET", "http://pont.invalid/api/v1/mobile/consents", "Bearer pat_secret_value", None),
            ("POST", "http://pont.invalid/api/v1/mobile/consent-requests/cr%201/approve", "Bearer pat_secret_value", None),
            ("GET", "http://pont.invalid/api/v1/mobile/access-log", "Bearer pat_secret_value", None)])
        with self.assertRaisesRegex(pont.ValidationError, "no patient token"):
            PatientApp(base_url="http://pont.invalid", sender=server).consents()
        with self.assertRaisesRegex(pont.ValidationError, "code is required"):
            app.sign_in("CM482930174629", "")
        self.assertEqual((len(server.calls), server.tokens), (4, 0))

    def test_every_operation_of_the_surface_has_a_method(self):
        p = client(FakeServer())
        named = 0
        for operation, names in SURFACE.items():
            with self.subTest(operation):
                if "excluded" in names:
                    self.assertTrue(names["excluded"])
                    continue
                head, method = names["python"].split(".")
                owner = getattr(pont, head) if head[0].isupper() else getattr(p, head)
                self.assertTrue(callable(getattr(owner, method)), names["python"])
                named += 1
        self.assertGreater(named, 60)

    def test_what_surface_library_names_exists(self):
        for name, names in LIBRARY.items():
            with self.subTest(name):
                owner, method = names["python"].split(".")
                self.assertTrue(callable(getattr(getattr(pont, owner), method)), names["python"])
        self.assertIsInstance(inspect.getattr_static(Pont, "create"), classmethod)


class Cancellation(unittest.TestCase):
    """``cancel=`` (a threading.Event, set from another thread): before a call, during the wait between attempts and
    while an answer is awaited."""

    HID = "CM482930174629"

    def test_set_before_the_call_no_request_is_sent(self):
        server = FakeServer([OK])
        cancel = threading.Event()
        cancel.set()
        with self.assertRaises(pont.CancelledError) as caught:
            client(server).health_ids.verify(self.HID, cancel=cancel)
        self.assertIsInstance(caught.exception, pont.PontError)
        self.assertNotIsInstance(caught.exception, pont.NetworkError)
        self.assertEqual((server.tokens, server.calls), (0, []))  # not even the token
        with self.assertRaisesRegex(pont.ValidationError, "cancel must be a threading.Event"):
            client(server).health_ids.verify(self.HID, cancel=True)

    def test_set_during_the_wait_between_attempts(self):
        attempted = threading.Event()
        cancel = threading.Event()
        server = FakeServer([(503, {"Retry-After": "30"}, "busy"), OK])

        def send(*args):
            try:
                return server(*args)
            finally:
                if not args[1].endswith("/auth/token"):
                    attempted.set()
        threading.Thread(target=lambda: attempted.wait(30) and cancel.set(), daemon=True).start()
        p = client(server, sleep=time.sleep)  # the real wait: cancel.wait(30)
        p._http._sender = send
        started = time.monotonic()
        with self.assertRaisesRegex(pont.CancelledError, "before attempt 1"):
            p.health_ids.verify(self.HID, cancel=cancel)
        self.assertLess(time.monotonic() - started, 10)  # not the 30 s of Retry-After
        self.assertEqual(len(server.calls), 1)  # no further attempt

        # An injected sleep (tests) is called as it is; the event is checked after it.
        cancel = threading.Event()
        slept = []
        server = FakeServer([(503, {}, "busy"), OK])
        p = client(server, sleep=lambda s: (slept.append(s), cancel.set()), random=lambda: 0.5)
        with self.assertRaises(pont.CancelledError):
            p.health_ids.verify(self.HID, cancel=cancel)
        self.assertEqual((slept, len(server.calls)), ([0.25], 1))

    def test_set_while_the_answer_is_awaited_aborts_it_and_discards_the_connection(self):
        import http.server
        arrived, release = threading.Event(), threading.Event()
        gets = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def answer(self, body):
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the client is gone
                    self.close_connection = True

            def do_POST(self):  # the token
                self.rfile.read(int(self.headers["Content-Length"]))
                self.answer(b'{"access_token":"t","expires_in":3600}')

            def do_GET(self):
                gets.append(self.path)
                if len(gets) == 1:
                    arrived.set()
                    release.wait(60)  # the slow answer: until the test ends
                self.answer(b'{"valid":true}')

        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        self.addCleanup(httpd.server_close)
        self.addCleanup(httpd.shutdown)
        self.addCleanup(release.set)
        cancel = threading.Event()
        threading.Thread(target=lambda: arrived.wait(30) and cancel.set(), daemon=True).start()
        responses = []
        with Pont(client_id="cli_x", client_secret="pcs_x", base_url=f"http://127.0.0.1:{httpd.server_address[1]}",
                  on_response=responses.append) as p:
            started = time.monotonic()
            with self.assertRaisesRegex(pont.CancelledError, "during attempt 0"):
                p.health_ids.verify(self.HID, cancel=cancel)
            self.assertLess(time.monotonic() - started, 10)  # the answer would come after 60 s
            self.assertTrue(arrived.is_set())  # the request was in flight
            self.assertEqual(len(gets), 1)  # and not retried
            self.assertIsInstance(responses[-1].error, pont.CancelledError)
            # The aborted connection went back to no pool: the next call opens a new one and gets its answer.
            opened = p._http.pool.opened
            self.assertEqual(p.health_ids.verify(self.HID, cancel=threading.Event()), {"valid": True})
            self.assertEqual(p._http.pool.opened, opened + 1)
            self.assertEqual(p.health_ids.verify(self.HID), {"valid": True})
            self.assertEqual(p._http.pool.opened, opened + 1)  # that one was kept alive


class Packaging(unittest.TestCase):
    def test_installs_without_an_index(self):
        """As users install it with no package index: a wheel built by pip into a fresh venv, importable there."""
        import tempfile
        import venv
        root = Path(__file__).resolve().parents[1]
        with tempfile.TemporaryDirectory() as tmp:
            venv.create(tmp, with_pip=False, system_site_packages=True)  # this pip installs into it (--python); setuptools is seen
            python = str(Path(tmp) / "bin" / "python")
            # A copy of the sources, so that the build leaves nothing in the repository.
            subprocess.run(["cp", "-r", str(root), f"{tmp}/src"], check=True)
            subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-index", "--no-build-isolation", f"{tmp}/src"], check=True, cwd=tmp)
            out = subprocess.run([python, "-c", "import pont, pont.types, importlib.metadata as m; print(pont.__version__, m.version('pont-client'), pont.__file__)"],
                                 check=True, cwd=tmp, capture_output=True, text=True).stdout.split()
        self.assertEqual(out[:2], [pont.__version__, pont.__version__])
        self.assertIn("site-packages", out[2])


class Streaming(unittest.TestCase):
    def test_a_bulk_file_is_read_line_by_line_from_the_socket(self):
        """A real socket: the lines are parsed as they arrive (the server sends the second only after the first was read)."""
        import http.server
        import threading
        first_read = threading.Event()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):  # the token
                self.rfile.read(int(self.headers["Content-Length"]))
                body = b'{"access_token":"t","expires_in":3600}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "application/fhir+ndjson")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for i, line in enumerate((b'{"resourceType":"Patient","id":"a"}\n', b'{"resourceType":"Patient","id":"b"}\n')):
                    if i:
                        first_read.wait(10)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        self.addCleanup(httpd.server_close)
        self.addCleanup(httpd.shutdown)
        with Pont(client_id="cli_x", client_secret="pcs_x", base_url=f"http://127.0.0.1:{httpd.server_address[1]}") as p:
            lines = p.bulk.file("http://public.example/api/fhir/R4/$export-status/j/file/1")
            self.assertEqual(next(lines)["id"], "a")  # before the server sent the second line
            first_read.set()
            self.assertEqual([r["id"] for r in lines], ["b"])


def setUpModule():
    global SERVER, INFO
    SERVER = subprocess.Popen(["node", str(CONFORMANCE / "server.mjs")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    INFO = json.loads(SERVER.stdout.readline())


def tearDownModule():
    SERVER.stdin.close()
    SERVER.wait(timeout=60)
    SERVER.stdout.close()


def proxied(info, **kw):
    """A client of the every-scope integrator, through the fault proxy; ``sleep`` records the waits."""
    full = info["demo"]["clients"][0]
    return Pont(client_id=full["client_id"], client_secret=full["client_secret"], base_url=info["fault_url"], **kw)


def fault(mode):
    token = f"py-{mode}-{uuid.uuid4()}"
    return token, {"X-Conformance-Fault": f"{mode}; id={token}"}


def fault_counts(token):
    with urllib.request.urlopen(f"{INFO['fault_url']}/__conformance/requests?id={token}") as res:
        return json.loads(res.read())


class Faults(unittest.TestCase):
    """The retry rules against the real server, through the conformance fault proxy."""

    def setUp(self):
        self.slept = []
        self.p = proxied(INFO, sleep=self.slept.append)
        self.hid = INFO["demo"]["patients"][0]["health_id"]
        self.addCleanup(self.p.close)

    def lab(self, name):
        return {"health_id": self.hid, "test_name": name, "result_value": "4.1", "unit": "mmol/L", "flagged": False}

    def test_a_lost_answer_on_a_creating_call_is_retried_with_its_key_and_takes_effect_once(self):
        token, headers = fault("lose-answer")
        name = f"Lost answer {token}"
        answer = self.p.records.push_lab_result(self.lab(name), headers=headers)
        counts = fault_counts(token)
        self.assertEqual((counts["received"], counts["forwarded"]), (2, 2))
        self.assertEqual(len(set(counts["idempotency_keys"])), 1)
        self.assertIsNotNone(counts["idempotency_keys"][0])
        self.assertTrue(answer.request_id)
        labs = [r for r in self.p.records.get(self.hid, type="lab_results").auto_paging_iter() if r.get("test_name") == name]
        self.assertEqual([r["id"] for r in labs], [answer["lab_result_id"]])

    def test_a_lost_answer_on_delete_without_a_key_is_not_retried(self):
        sub = self.p.webhooks.subscribe(INFO["receiver_url"], ["lab_result.released"], "lost delete")
        token, headers = fault("lose-answer")
        with self.assertRaises(pont.NetworkError) as caught:
            self.p.webhooks.unsubscribe(sub["id"], headers=headers)
        self.assertNotIsInstance(caught.exception, pont.TimeoutError)
        self.assertEqual(fault_counts(token), {"received": 1, "forwarded": 1, "idempotency_keys": [None]})
        self.assertNotIn(sub["id"], [s["id"] for s in self.p.webhooks.list().data])  # it took effect, once

    def test_a_lost_answer_on_a_fhir_delete_with_a_key_is_retried(self):
        patient = self.p.fhir.create({"resourceType": "Patient", "name": [{"family": "Delete", "given": ["Lost"]}], "birthDate": "1990-01-01"})
        token, headers = fault("lose-answer")
        answer = self.p.fhir.delete("Patient", patient["id"], idempotency_key=f"del-{token}", headers=headers)
        self.assertEqual(answer.status, 204)
        self.assertEqual(fault_counts(token)["forwarded"], 2)
        with self.assertRaises(pont.PontError) as caught:
            self.p.fhir.read("Patient", patient["id"])
        self.assertEqual(caught.exception.status, 410)

    def test_a_reset_connection_on_a_read_is_retried(self):
        token, headers = fault("reset")
        self.assertEqual(self.p.consents.status(self.hid, headers=headers)["status"], "active")
        self.assertEqual(fault_counts(token)["received"], 2)
        self.assertEqual(len(self.slept), 1)

    def test_429_waits_the_retry_after_exactly(self):
        token, headers = fault("status-429")
        self.assertEqual(self.p.health_ids.verify(self.hid, headers=headers)["valid"], True)
        self.assertEqual(self.slept, [1.0])
        self.assertEqual(fault_counts(token), {"received": 2, "forwarded": 1, "idempotency_keys": [None, None]})

    def test_503_on_a_post_without_a_key_is_not_retried(self):
        token, headers = fault("status-503")
        with self.assertRaises(pont.ServerError) as caught:
            self.p.fhir.create({"resourceType": "Patient", "name": [{"family": "Never"}]}, headers=headers)
        self.assertEqual((caught.exception.status, caught.exception.error_code), (503, "SERVICE_UNAVAILABLE"))
        self.assertEqual(fault_counts(token)["received"], 1)

    def test_a_slow_answer_times_out(self):
        token, headers = fault("slow")
        with self.assertRaises(pont.TimeoutError):
            self.p.records.push_lab_result(self.lab("slow"), headers=headers, timeout=0.5, max_retries=0)
        self.assertEqual(fault_counts(token)["received"], 1)

    def test_break_glass_headers_reach_the_server_which_audits_the_reason(self):
        foreign = INFO["foreign_health_id"]
        with self.assertRaises(pont.ConsentRequiredError):
            self.p.patients.get_summary(foreign)
        reason = f"Unconscious patient in the ED {uuid.uuid4()}"
        summary = self.p.patients.get_summary(foreign, emergency_reason=reason, purpose_of_use="ETREAT")
        self.assertIn("patient", summary)
        self.assertTrue(summary.request_id)
        audited = next((e for e in self.p.fhir.search("AuditEvent", {"_count": 100}).auto_paging_iter()
                        if any(p.get("text") == reason for p in e.get("purposeOfEvent") or [])), None)
        self.assertEqual(audited["purposeOfEvent"][0]["coding"][0]["code"], "BTG")

    def test_a_bridge_sync_whose_answer_is_lost_counts_once(self):
        a = INFO["demo"]["bridge_agent"]
        agent = BridgeAgent(agent_id=a["agent_id"], agent_key=a["agent_key"], facility_id=a["facility_id"], base_url=INFO["fault_url"], sleep=self.slept.append)
        self.addCleanup(agent.close)
        self.assertEqual(agent.heartbeat("conformance-1.0")["status"], "ok")
        token, headers = fault("lose-answer")
        batch_id = f"py-batch-{token}"
        synced = agent.sync([{"resourceType": "Practitioner", "id": f"dr-{token[-12:]}", "name": [{"family": "Sync"}]}], batch_id=batch_id, headers=headers)
        self.assertEqual((synced["batch_id"], synced["counts"]["created"], synced["counts"]["failed"]), (batch_id, 1, 0))
        self.assertEqual(fault_counts(token), {"received": 2, "forwarded": 2, "idempotency_keys": [batch_id, batch_id]})
        self.assertEqual(synced.headers.get("idempotent-replayed"), "true")

    def test_paging_over_1000_resources_holds_one_page(self):
        paging = INFO["paging"]
        p = proxied(INFO)
        self.addCleanup(p.close)
        tracemalloc.start()
        try:
            count = 0
            ids = set()
            for resource in p.fhir.search(paging["resource_type"], {**paging["params"], "_count": 100}).auto_paging_iter():
                count += 1
                ids.add(resource["id"])
            _, iterating = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            everything = [r for r in p.fhir.search(paging["resource_type"], {**paging["params"], "_count": 100}).auto_paging_iter()]
            _, holding = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        self.assertEqual((count, len(ids), len(everything)), (paging["total"], paging["total"], paging["total"]))
        print(f"\npaging {count} resources: peak {iterating / 1e6:.2f} MB iterating, {holding / 1e6:.2f} MB holding them all", file=sys.stderr)
        self.assertLess(iterating, holding / 2)

    def test_connections_are_kept_alive_except_for_a_call_that_may_not_be_repeated(self):
        p = proxied(INFO)
        self.addCleanup(p.close)
        for _ in range(5):
            p.consents.status(self.hid)
        self.assertEqual(p._http.pool.opened, 1)  # the token and five calls on one connection
        with self.assertRaises(pont.NotFoundError):
            p.webhooks.unsubscribe("whsub_none")
        self.assertEqual(p._http.pool.opened, 2)

    def test_threads_share_a_client(self):
        import concurrent.futures
        p = proxied(INFO)
        self.addCleanup(p.close)
        with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
            answers = list(pool.map(lambda _: p.consents.status(self.hid)["status"], range(30)))
        self.assertEqual(answers, ["active"] * 30)
        self.assertLessEqual(p._http.pool.opened, 6 + 1)  # at most a connection per thread (and the token's)


class LiveScenario(unittest.TestCase):
    def test_every_method(self):
        info = INFO
        full = info["demo"]["clients"][0]
        with self.assertRaises(pont.AuthenticationError):
            with Pont(client_id=full["client_id"], client_secret="pcs_wrong", base_url=info["base_url"]) as wrong:
                wrong.health_ids.verify("CM482930174629")
        p = Pont.create(client_id=full["client_id"], client_secret=full["client_secret"], base_url=info["base_url"])
        self.addCleanup(p.close)
        patient = info["demo"]["patients"][0]
        hid = patient["health_id"]

        self.assertEqual(p.health_ids.resolve({"health_id": hid})["status"], "found")
        created = p.health_ids.resolve({"first_name": "Ama", "last_name": "Conformance", "date_of_birth": "1991-02-03", "sex": "female"})
        self.assertEqual(created["status"], "created")
        self.assertTrue(p.health_ids.verify(hid)["valid"])

        self.assertEqual(p.consents.status(hid)["status"], "active")
        new_hid = created["health_id"]
        expires = (datetime.now(timezone.utc) + timedelta(days=1)).isoformat()
        self.assertEqual(p.consents.grant(new_hid, {"consent_type": "full_record", "expires_at": expires})["status"], "active")
        self.assertEqual(p.consents.revoke(new_hid)["status"], "revoked")
        self.assertEqual(p.consents.request({"health_id": new_hid, "purpose": "follow-up", "requested_scopes": ["labs:read"]})["status"], "pending")
        self.assertTrue(p.patients.issue_pairing_code(hid)["code"])

        self.assertEqual(p.patients.get_summary(hid)["patient"]["first_name"], patient["first_name"])
        self.assertEqual(p.patients.search(hid)["health_id"], hid)
        self.assertIsInstance(p.records.get(hid, type="diagnoses")["records"]["diagnoses"], list)

        sub = p.webhooks.subscribe(info["receiver_url"], ["lab_result.released"], "conformance")
        self.assertTrue(sub["webhook_secret"].startswith("whsec_"))
        lab = p.records.push_lab_result({"health_id": hid, "test_name": "Hemoglobin", "result_value": "6.1", "unit": "g/dL", "flagged": True, "flag_level": "critical_low"})
        self.assertEqual(lab["flag"], "LL")
        enc = p.records.push_encounter({"health_id": hid, "encounter_type": "cdss_alert", "alert_type": "drug_interaction", "severity": "high", "clinical_note": "check INR"})
        self.assertTrue(enc["detected_issue_id"])

        for bundle in (p.fhir.medication_requests(hid, {"status": "active"}), p.fhir.allergy_intolerances(hid), p.fhir.diagnostic_reports(hid),
                       p.fhir.conditions(hid, {"clinical-status": "active"}), p.fhir.patient_everything(hid, {"_count": 20}),
                       p.fhir.everything(patient["patient_id"], {"_count": 20})):
            self.assertEqual(bundle["resourceType"], "Bundle")
        observations = list(p.fhir.search("Observation", {"_count": 10, "patient": f"Patient/{patient['patient_id']}"}).auto_paging_iter())
        self.assertGreater(len(observations), 10)  # every page, not the first 10
        self.assertEqual(p.fhir.read("Patient", patient["patient_id"])["resourceType"], "Patient")
        self.assertEqual(p.fhir.capabilities()["resourceType"], "CapabilityStatement")
        self.assertGreater(len(p.fhir.search_post("Observation", {"patient": f"Patient/{patient['patient_id']}"}).data), 0)
        self.assertGreater(len(p.fhir.search_compartment(patient["patient_id"], "Condition").data), 0)

        # FHIR writes: create, update, patch-free version history, vread, conditional update, transaction, delete.
        org = p.fhir.create({"resourceType": "Organization", "name": "Clinique du Lac"})
        org["name"] = "Clinique du Lac (renamed)"
        updated = p.fhir.update(org, if_match=f'W/"{org["meta"]["versionId"]}"')
        self.assertNotEqual(updated["meta"]["versionId"], org["meta"]["versionId"])
        with self.assertRaises(pont.PreconditionFailedError):
            p.fhir.update(org, if_match=f'W/"{org["meta"]["versionId"]}"')
        self.assertEqual(len(p.fhir.history("Organization", org["id"]).data), 2)
        self.assertGreater(len(p.fhir.history("Organization", params={"_count": 5}).data), 0)
        self.assertEqual(p.fhir.vread("Organization", org["id"], org["meta"]["versionId"])["name"], "Clinique du Lac")
        ident = f"cond-{uuid.uuid4()}"
        cond = p.fhir.conditional_update({"resourceType": "Organization", "name": "Cond", "identifier": [{"system": "urn:x", "value": ident}]},
                                         {"identifier": f"urn:x|{ident}"})
        self.assertEqual(cond.status, 201)
        result = p.fhir.transaction({"resourceType": "Bundle", "type": "transaction", "entry": [
            {"resource": {"resourceType": "Organization", "name": "In a bundle"}, "request": {"method": "POST", "url": "Organization"}}]})
        self.assertEqual(result["type"], "transaction-response")
        self.assertEqual(p.fhir.conditional_delete("Organization", {"identifier": f"urn:x|{ident}"}).status, 204)
        self.assertRaises(pont.PontError, p.fhir.read, "Organization", cond["id"])
        self.assertEqual(p.fhir.delete("Organization", org["id"]).status, 204)

        def delivery_of(lab_result_id):
            """The delivery the receiver got (the worker sends it in the background: up to 60 s on a busy machine)."""
            give_up = time.monotonic() + 60
            while time.monotonic() < give_up:
                with urllib.request.urlopen(info["receiver_url"]) as res:
                    delivered = json.loads(res.read())
                found = next((d for d in delivered if json.loads(d["raw_body"])["data"].get("lab_result_id") == lab_result_id), None)
                if found:
                    return found
                time.sleep(0.1)
            self.fail(f"no delivery of lab result {lab_result_id} within 60 s")

        delivery = delivery_of(lab["lab_result_id"])
        self.assertIs(p.webhooks.verify_signature(delivery["raw_body"].encode("utf-8"), delivery["signature"], sub["webhook_secret"]), True)
        event = p.webhooks.parse_event(delivery["raw_body"], delivery["signature"], sub["webhook_secret"])
        self.assertEqual(event["data"]["health_id"], hid)
        self.assertIn(sub["id"], [s["id"] for s in p.webhooks.list().data])
        self.assertEqual(p.webhooks.replay(event["id"])["event_id"], event["id"])
        self.assertGreater(len(p.webhooks.event_deliveries(event["id"]).data), 0)
        self.assertIn(event["id"], [d.get("event_id") for d in p.webhooks.deliveries(subscription_id=sub["id"], limit=1).auto_paging_iter()])
        # A rotation with overlap: the next delivery is signed with both secrets, and either verifies it.
        rotated = p.webhooks.rotate_secret(sub["id"], 3600)
        self.assertTrue(rotated["webhook_secret"].startswith("whsec_"))
        self.assertTrue(rotated["previous_secret_expires_at"])
        lab2 = p.records.push_lab_result({"health_id": hid, "test_name": "Potassium", "result_value": "6.9", "unit": "mmol/L", "flagged": True, "flag_level": "critical_high"})
        during = delivery_of(lab2["lab_result_id"])
        self.assertEqual(during["signature"].count("v1="), 2)
        for secret in (rotated["webhook_secret"], sub["webhook_secret"]):
            self.assertIs(p.webhooks.verify_signature(during["raw_body"].encode("utf-8"), during["signature"], secret), True)
        p.webhooks.unsubscribe(sub["id"])

        self.assertGreater(len(p.inventory.blood_inventory(facility_id="fac-demo").data), 0)
        self.assertEqual([i["medication"]["code"] for i in p.inventory.pharmacy_stock(facility_id="fac-demo", below_reorder_level=True).auto_paging_iter()], ["198440"])
        self.assertEqual(len(p.payments.reconciliation(info["demo"]["seeded"]["payments_date"])["payments"]), 5)
        line = {"medication": {"code": "py-stock-1", "code_system": "http://www.nlm.nih.gov/research/umls/rxnorm"}, "quantity_on_hand": 5}
        self.assertEqual(p.inventory.update_pharmacy_stock({"facility_id": "fac-demo", "items": [line]})["created"], 1)


        token = p.auth.token()
        self.assertTrue(p.auth.introspect(token["access_token"])["active"])
        self.assertTrue(p.auth.introspect_current())

        with self.assertRaises(pont.NotFoundError):
            p.records.get(info["unregistered_health_id"])
        with self.assertRaises(pont.ValidationError):
            p.health_ids.verify(hid[:2] + str((int(hid[2]) + 1) % 10) + hid[3:])  # one digit changed: always detected (00 ≡ 97 for check digits)
        with self.assertRaises(pont.ValidationError):
            p.records.push_lab_result({"health_id": hid, "test_name": "K", "result_value": "4", "flagged": True, "flag_level": "normal"})
        with self.assertRaises(pont.ConsentRequiredError):
            p.patients.get_summary(info["foreign_health_id"])

        # The client's own secret, rotated with an overlap: both secrets get tokens until it ends.
        new_secret = p.auth.rotate_client_secret(3600)
        self.assertTrue(new_secret["client_secret"].startswith("pcs_"))
        for secret in (new_secret["client_secret"], full["client_secret"]):
            with Pont(client_id=full["client_id"], client_secret=secret, base_url=info["base_url"]) as other:
                other.auth.introspect_current()

    def test_create_checks_the_credentials_with_one_token_request_and_the_constructor_makes_none(self):
        full = INFO["demo"]["clients"][0]
        sent = []
        hook = lambda r: sent.append((r.method, urlsplit(r.url).path))
        token = ("POST", "/api/v1/connect/auth/token")

        # The constructor is lazy, even with a wrong secret: no request.
        with Pont(client_id=full["client_id"], client_secret="pcs_wrong", base_url=INFO["base_url"], on_request=hook):
            self.assertEqual(sent, [])

        # Eager, right secret: one token request before create returns; the next call reuses that token.
        with Pont.create(client_id=full["client_id"], client_secret=full["client_secret"], base_url=INFO["base_url"], on_request=hook) as p:
            self.assertIsInstance(p, Pont)
            self.assertEqual(sent, [token])
            hid = INFO["demo"]["patients"][0]["health_id"]
            self.assertTrue(p.health_ids.verify(hid)["valid"])
            self.assertEqual(sent, [token, ("GET", f"/api/v1/connect/patients/verify/{hid}")])

        # Eager, wrong secret or unknown client: AuthenticationError from create itself, after one token request.
        for client_id, client_secret in [(full["client_id"], "pcs_wrong"), ("cli_unknown", full["client_secret"])]:
            with self.subTest(client_id=client_id):
                sent.clear()
                with self.assertRaises(pont.AuthenticationError) as caught:
                    Pont.create(client_id=client_id, client_secret=client_secret, base_url=INFO["base_url"], on_request=hook)
                self.assertEqual(caught.exception.status, 401)
                self.assertEqual(sent, [token])

    def test_discovery_documents_and_probes_without_a_token(self):
        sent = []
        with Pont(client_id="cli_none", client_secret="pcs_none", base_url=INFO["base_url"], on_request=lambda r: sent.append(r.headers.get("Authorization"))) as p:
            smart = p.discovery.smart_configuration()
            self.assertTrue(smart["token_endpoint"].endswith("/api/v1/connect/auth/token"))
            self.assertEqual(p.discovery.fhir_smart_configuration()["token_endpoint"], smart["token_endpoint"])
            self.assertTrue(p.discovery.oauth_server_metadata()["jwks_uri"].endswith("/.well-known/jwks.json"))
            self.assertGreater(len(p.discovery.jwks()["keys"]), 0)
            self.assertIn("/api/v1/mobile/consents", p.discovery.openapi()["paths"])
            self.assertEqual(p.system.healthz()["status"], "ok")
            self.assertEqual(p.system.readyz()["checks"]["database"], "ok")
        self.assertEqual(sent, [None] * 7)  # bogus credentials, never used

    def test_patient_app_pairs_answers_revokes_reads_its_log_and_signs_out(self):
        p = Pont(client_id=INFO["demo"]["clients"][0]["client_id"], client_secret=INFO["demo"]["clients"][0]["client_secret"], base_url=INFO["base_url"])
        self.addCleanup(p.close)
        clinic = Pont(client_id=INFO["clinic"]["client_id"], client_secret=INFO["clinic"]["client_secret"], base_url=INFO["base_url"])
        self.addCleanup(clinic.close)
        hid = p.health_ids.resolve({"first_name": "Kofi", "last_name": f"Mobile{uuid.uuid4().hex[:8]}", "date_of_birth": "1988-04-05", "sex": "male"})["health_id"]
        code = p.patients.issue_pairing_code(hid)["code"]  # the demo organisation registered the patient: it may pair
        with self.assertRaises(pont.AuthenticationError), PatientApp(base_url=INFO["base_url"]) as wrong:
            wrong.sign_in(hid, "WRONG-CODE")
        slept = []
        app = PatientApp(base_url=INFO["fault_url"], sleep=slept.append)
        self.addCleanup(app.close)
        self.assertFalse(app.signed_in)
        token = app.sign_in(hid, code)
        self.assertTrue(token["access_token"].startswith("pat_"))
        self.assertTrue(app.signed_in)

        # The clinic asks; so does the demo organisation, which paired the app: the app never approves that one's requests.
        asked = clinic.consents.request({"health_id": hid, "purpose": "follow-up", "requested_scopes": ["labs:read"]})
        own = p.consents.request({"health_id": hid, "purpose": "second opinion", "requested_scopes": ["labs:read"]})
        mine = {c["consent_id"]: c["status"] for c in app.consents().data}
        self.assertEqual((mine[asked["consent_request_id"]], mine[own["consent_request_id"]]), ("pending", "pending"))
        approved = app.approve_request(asked["consent_request_id"])
        self.assertEqual((approved["organization_id"], approved["status"]), (INFO["clinic"]["organization_id"], "active"))
        self.assertEqual(clinic.consents.status(hid)["status"], "active")
        self.assertRaises(pont.AuthorizationError, app.approve_request, own["consent_request_id"])
        self.assertEqual(app.deny_request(own["consent_request_id"])["status"], "denied")
        self.assertRaises(pont.ConflictError, app.deny_request, own["consent_request_id"])

        # A revocation whose answer is lost: sent once (the server does not deduplicate mobile writes), and it took effect.
        token_id, headers = fault("lose-answer")
        self.assertRaises(pont.NetworkError, app.revoke_consent, approved["consent_id"], headers=headers)
        self.assertEqual(fault_counts(token_id), {"received": 1, "forwarded": 1, "idempotency_keys": [None]})
        self.assertEqual({c["consent_id"]: c["status"] for c in app.consents().data}[approved["consent_id"]], "revoked")
        self.assertEqual(clinic.consents.status(hid)["status"], "revoked")

        # The access log: a reset connection on a read is retried; iterated in pages of two.
        token_id, headers = fault("reset")
        self.assertEqual(len(app.access_log(limit=2, headers=headers).data), 2)
        self.assertEqual(fault_counts(token_id)["received"], 2)
        log = list(app.access_log(limit=2).auto_paging_iter())
        self.assertGreater(len(log), 2)
        self.assertLessEqual({"issuePairingCode", "approveConsentRequest"}, {e["operation"] for e in log})

        app.sign_out()
        self.assertFalse(app.signed_in)
        with self.assertRaises(pont.AuthenticationError), PatientApp(base_url=INFO["base_url"], token=token["access_token"]) as signed_out:
            signed_out.consents()

    def test_reset_demo_runs_after_the_other_live_tests(self):
        """Named to run after the other tests that use the server (unittest runs a class's tests by name, and this
        class after Faults): the reset replaces the clients the demo seeded and keeps the every-scope integrator made
        beside it (as a person would make it with the CLI)."""
        full, seeded = INFO["demo"]["clients"][0], INFO["demo"]["clients"][1]
        with Pont(client_id=full["client_id"], client_secret=full["client_secret"], base_url=INFO["base_url"]) as p:
            p.auth.introspect_current()
            demo = p.demo.reset()
            self.assertEqual(demo.status, 201)
            self.assertEqual(demo["replaced"]["clients"], 2)
            self.assertEqual(len(demo["patients"]), 5)
            fresh = demo["clients"][0]
            with Pont(client_id=fresh["client_id"], client_secret=fresh["client_secret"], base_url=INFO["base_url"]) as other:
                self.assertTrue(other.health_ids.verify(demo["patients"][0]["health_id"])["valid"])
            p.auth.introspect_current()  # not the demo's: kept
            with self.assertRaises(pont.AuthenticationError):
                Pont.create(client_id=seeded["client_id"], client_secret=seeded["client_secret"], base_url=INFO["base_url"])

    def test_types_are_generated_from_the_served_document(self):
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
        import generate_types
        with urllib.request.urlopen(INFO["base_url"] + "/api/openapi.json") as res:
            schemas = json.loads(res.read())["components"]["schemas"]
        self.assertEqual(generate_types.OUT.read_text(encoding="utf-8"), generate_types.render(schemas),
                         "pont/types.py is out of date: python3 scripts/generate_types.py <base_url>/api/openapi.json")


if __name__ == "__main__":
    unittest.main()
