"""The conformance suite (clients/conformance) for the Python library, with unittest."""
import json
import os
import subprocess
import time
import unittest
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pont
from pont import Pont, webhooks

CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance"
VECTORS = json.loads((CONFORMANCE / "vectors.json").read_text(encoding="utf-8"))


def fake_sender(answers, calls):
    """A sender that answers the token endpoint and then each of ``answers`` (status, headers, body) in turn."""
    tokens = []

    def send(method, url, headers, body, timeout):
        if url.endswith("/auth/token"):
            tokens.append(1)
            expires = 30 if len(tokens) == 1 else 3600
            return 200, {}, json.dumps({"access_token": f"tok-{len(tokens)}", "expires_in": expires}).encode()
        calls.append({"url": url, "headers": dict(headers)})
        status, res_headers, res_body = answers.pop(0)
        raw = res_body if isinstance(res_body, str) else json.dumps(res_body)
        return status, {k.lower(): v for k, v in res_headers.items()}, raw.encode()

    return send


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
                client = Pont(client_id="cli_x", client_secret="pcs_x", base_url="http://pont.invalid", max_retries=0,
                              sender=fake_sender([(v["status"], v["headers"], v["body"])] * 2, []))
                with self.assertRaises(getattr(pont, v["exception"])) as caught:
                    client.health_ids.verify("CM482930174629")
                error = caught.exception
                self.assertIsInstance(error, pont.ServiceError)
                self.assertEqual(error.status, v["status"])
                self.assertEqual(error.error_code, v["error_code"])
                self.assertEqual(error.request_id, v["headers"].get("x-request-id"))
                if "retry_after" in v:
                    self.assertEqual(error.retry_after, v["retry_after"])
                self.assertNotIn("pcs_x", str(error))


class Behaviour(unittest.TestCase):
    def test_retries_keep_the_idempotency_key_and_refresh_the_token(self):
        calls = []
        answers = [
            (429, {}, {"status": "error", "error_code": "RATE_LIMITED", "message": "slow down", "retry_after": 0}),
            (503, {}, "<html>busy</html>"),
            (201, {}, {"lab_result_id": "x"}),
            (422, {}, {"status": "error", "error_code": "VALIDATION_FAILED", "message": "bad"}),
        ]
        client = Pont(client_id="cli_x", client_secret="pcs_x", base_url="http://pont.invalid", backoff=0.001, sender=fake_sender(answers, calls))
        fields = {"health_id": "CM482930174629", "test_name": "K", "result_value": "4", "flagged": False}
        self.assertEqual(client.records.push_lab_result(fields), {"lab_result_id": "x"})
        self.assertEqual(len(calls), 3)
        keys = {c["headers"]["Idempotency-Key"] for c in calls}
        self.assertEqual(len(keys), 1)
        # The first token expired within 60 s: a new one was fetched before the first call.
        self.assertEqual(calls[0]["headers"]["Authorization"], "Bearer tok-2")
        with self.assertRaises(pont.ValidationError):
            client.records.push_lab_result(fields)
        self.assertEqual(len(calls), 4)  # a 422 is never retried

    def test_next_tokens_use_the_rotated_secret(self):
        secrets_used = []

        def send(method, url, headers, body, timeout):
            sent = json.loads(body or b"{}")
            if url.endswith("/auth/token"):
                secrets_used.append(sent["client_secret"])
                # Tokens that expire within 60 s: every call asks for a new one.
                return 200, {}, json.dumps({"access_token": "t", "expires_in": 30}).encode()
            if url.endswith("/api/v1/connect/auth/clients/cli_x/rotate-secret"):
                answer = {"client_id": "cli_x", "client_secret": "pcs_new", "previous_secret_expires_at": None, "overlap": sent.get("overlap_seconds")}
                return 200, {}, json.dumps(answer).encode()
            return 200, {}, b"{}"

        client = Pont(client_id="cli_x", client_secret="pcs_old", base_url="http://pont.invalid", sender=send)
        rotated = client.auth.rotate_client_secret(0)
        self.assertEqual((rotated["client_secret"], rotated["overlap"]), ("pcs_new", 0))
        client.webhooks.list()
        self.assertEqual(secrets_used, ["pcs_old", "pcs_old", "pcs_new"])

    def test_missing_argument_fails_before_any_request(self):
        calls = []
        client = Pont(client_id="cli_x", client_secret="pcs_x", base_url="http://pont.invalid", sender=fake_sender([], calls))
        with self.assertRaisesRegex(pont.ValidationError, "health_id is required"):
            client.patients.get_summary("")
        with self.assertRaisesRegex(pont.ValidationError, "test_name is required"):
            client.records.push_lab_result({"health_id": "CM482930174629"})
        self.assertEqual(calls, [])


class LiveScenario(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = subprocess.Popen(["node", str(CONFORMANCE / "server.mjs")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        cls.info = json.loads(cls.server.stdout.readline())

    @classmethod
    def tearDownClass(cls):
        cls.server.stdin.close()
        cls.server.wait(timeout=60)
        cls.server.stdout.close()

    def test_every_method(self):
        info = self.info
        full = info["demo"]["clients"][0]
        with self.assertRaises(pont.AuthenticationError):
            Pont(client_id=full["client_id"], client_secret="pcs_wrong", base_url=info["base_url"])
        p = Pont(client_id=full["client_id"], client_secret=full["client_secret"], base_url=info["base_url"])
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
                       p.fhir.conditions(hid, {"clinical-status": "active"}), p.fhir.patient_everything(hid, {"_count": 20})):
            self.assertEqual(bundle["resourceType"], "Bundle")
        observations = p.fhir.search("Observation", {"_count": 10, "patient": f"Patient/{patient['patient_id']}"})
        self.assertGreater(len(observations["entry"]), 10)  # every page, not the first 10
        self.assertEqual(p.fhir.read("Patient", patient["patient_id"])["resourceType"], "Patient")

        def delivery_of(lab_result_id):
            for _ in range(100):
                with urllib.request.urlopen(info["receiver_url"]) as res:
                    delivered = json.loads(res.read())
                found = next((d for d in delivered if json.loads(d["raw_body"])["data"].get("lab_result_id") == lab_result_id), None)
                if found:
                    return found
                time.sleep(0.1)
            return None

        delivery = delivery_of(lab["lab_result_id"])
        self.assertIs(p.webhooks.verify_signature(delivery["raw_body"].encode("utf-8"), delivery["signature"], sub["webhook_secret"]), True)
        event = p.webhooks.parse_event(delivery["raw_body"], delivery["signature"], sub["webhook_secret"])
        self.assertEqual(event["data"]["health_id"], hid)
        self.assertIn(sub["id"], [s["id"] for s in p.webhooks.list()["subscriptions"]])
        self.assertEqual(p.webhooks.replay(event["id"])["event_id"], event["id"])
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

        self.assertGreater(len(p.inventory.blood_inventory(facility_id="fac-demo")["items"]), 0)
        self.assertEqual([i["medication"]["code"] for i in p.inventory.pharmacy_stock(facility_id="fac-demo", below_reorder_level=True)["items"]], ["198440"])
        self.assertEqual(len(p.payments.reconciliation(info["demo"]["seeded"]["payments_date"])["payments"]), 5)

        with self.assertRaises(pont.NotFoundException):
            p.records.get(info["unregistered_health_id"])
        with self.assertRaises(pont.ValidationError):
            p.health_ids.verify(hid[:-2] + ("01" if hid.endswith("00") else "00"))
        with self.assertRaises(pont.ValidationError):
            p.records.push_lab_result({"health_id": hid, "test_name": "K", "result_value": "4", "flagged": True, "flag_level": "normal"})
        with self.assertRaises(pont.ConsentRequiredError):
            p.patients.get_summary(info["foreign_health_id"])

        # The client's own secret, rotated with an overlap: both secrets get tokens until it ends.
        new_secret = p.auth.rotate_client_secret(3600)
        self.assertTrue(new_secret["client_secret"].startswith("pcs_"))
        for secret in (new_secret["client_secret"], full["client_secret"]):
            Pont(client_id=full["client_id"], client_secret=secret, base_url=info["base_url"])


if __name__ == "__main__":
    unittest.main()
