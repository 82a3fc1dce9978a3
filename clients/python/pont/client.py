"""The entry class, ``Pont``, and its modules (interface section 4.7), in snake_case."""
from typing import Any, Dict, List, Mapping, Optional
from urllib.parse import quote

from . import webhooks as _webhooks
from ._http import Sender, Transport
from .errors import ValidationError

ENVIRONMENTS = {"sandbox": "https://sandbox.pont.health", "production": "https://api.pont.health"}

Json = Dict[str, Any]


def _required(method: str, **values: Any) -> None:
    for name, value in values.items():
        if value is None or value == "":
            raise ValidationError(f"{method}: {name} is required")


def _q(value: str) -> str:
    return quote(value, safe="")


class _Module:
    def __init__(self, http: Transport) -> None:
        self._http = http

    def _get(self, path: str, query: Optional[Mapping[str, Any]] = None) -> Any:
        return self._http.request("GET", path, query=query)

    def _post(self, path: str, body: Any = None, idempotent: bool = True) -> Any:
        return self._http.request("POST", path, body=body if body is not None else {}, idempotent=idempotent)


def _overlap(overlap_seconds: Optional[int]) -> Json:
    return {} if overlap_seconds is None else {"overlap_seconds": overlap_seconds}


class Auth(_Module):
    def rotate_client_secret(self, overlap_seconds: Optional[int] = None) -> Json:
        """Replaces this client's secret: the answer's ``client_secret`` is shown only this once, and this instance
        asks for its next tokens with it. The old secret stays valid for ``overlap_seconds`` (server default 86400;
        0: none)."""
        rotated = self._post(f"/api/v1/connect/auth/clients/{_q(self._http.client_id)}/rotate-secret", _overlap(overlap_seconds))
        self._http.use_client_secret(rotated["client_secret"])
        return rotated


class HealthIds(_Module):
    def resolve(self, fields: Mapping[str, Any]) -> Json:
        """Finds the patient by ``health_id``, or by ``first_name``, ``last_name``, ``date_of_birth`` (creating them)."""
        _required("health_ids.resolve", fields=fields)
        if not fields.get("health_id"):
            _required("health_ids.resolve", first_name=fields.get("first_name"))
        return self._post("/api/v1/connect/patients/resolve", dict(fields))

    def verify(self, health_id: str) -> Json:
        _required("health_ids.verify", health_id=health_id)
        return self._get(f"/api/v1/connect/patients/verify/{_q(health_id)}")


class Patients(_Module):
    def get_summary(self, health_id: str) -> Json:
        _required("patients.get_summary", health_id=health_id)
        return self._get(f"/api/v1/sdk/patients/{_q(health_id)}/summary")

    def search(self, health_id: str) -> Json:
        _required("patients.search", health_id=health_id)
        return self._get("/api/v1/connect/patient/search", {"health_id": health_id})


class Consents(_Module):
    def request(self, fields: Mapping[str, Any]) -> Json:
        _required("consents.request", health_id=fields.get("health_id"), purpose=fields.get("purpose"), requested_scopes=fields.get("requested_scopes"))
        return self._post("/api/v1/sdk/consents/request", dict(fields))

    def grant(self, health_id: str, fields: Mapping[str, Any]) -> Json:
        _required("consents.grant", health_id=health_id, consent_type=fields.get("consent_type"), expires_at=fields.get("expires_at"))
        return self._post(f"/api/v1/connect/patient/{_q(health_id)}/consent/grant", dict(fields))

    def status(self, health_id: str) -> Json:
        _required("consents.status", health_id=health_id)
        return self._get(f"/api/v1/connect/patient/{_q(health_id)}/consent")

    def revoke(self, health_id: str, fields: Optional[Mapping[str, Any]] = None) -> Json:
        _required("consents.revoke", health_id=health_id)
        return self._post(f"/api/v1/connect/patient/{_q(health_id)}/consent/revoke", dict(fields or {}))


class Records(_Module):
    def get(self, health_id: str, type: Optional[str] = None, limit: Optional[int] = None,
            cursor: Optional[str] = None, since: Optional[str] = None) -> Json:
        """Records by type (``all`` by default); a single type pages with ``cursor`` (``next_cursor``)."""
        _required("records.get", health_id=health_id)
        return self._get(f"/api/v1/connect/patient/{_q(health_id)}/records", {"type": type, "limit": limit, "cursor": cursor, "since": since})

    def push_encounter(self, fields: Mapping[str, Any]) -> Json:
        _required("records.push_encounter", health_id=fields.get("health_id"), encounter_type=fields.get("encounter_type"))
        return self._post("/api/v1/sdk/records/encounters", dict(fields))

    def push_lab_result(self, fields: Mapping[str, Any]) -> Json:
        _required("records.push_lab_result", health_id=fields.get("health_id"), test_name=fields.get("test_name"),
                  result_value=fields.get("result_value"), flagged=fields.get("flagged"))
        return self._post("/api/v1/sdk/records/lab-results", dict(fields))


class Fhir(_Module):
    def _all_pages(self, path: str, params: Optional[Mapping[str, Any]]) -> Json:
        """Every page of a FHIR search, following ``next`` links, as one Bundle."""
        first = self._get(path, params)
        entries = list(first.get("entry") or [])
        nxt = _next_link(first)
        while nxt:
            page = self._http.request("GET", "", url=nxt)
            entries.extend(page.get("entry") or [])
            nxt = _next_link(page)
        return {**first, "link": [l for l in first.get("link") or [] if l.get("relation") != "next"], "entry": entries}

    def _per_patient(self, type_: str, health_id: str, filters: Optional[Mapping[str, Any]]) -> Json:
        _required(f"fhir.{type_}", health_id=health_id)
        return self._all_pages(f"/api/v1/sdk/patients/{_q(health_id)}/fhir/{type_}", filters)

    def medication_requests(self, health_id: str, filters: Optional[Mapping[str, Any]] = None) -> Json:
        return self._per_patient("MedicationRequest", health_id, filters)

    def allergy_intolerances(self, health_id: str, filters: Optional[Mapping[str, Any]] = None) -> Json:
        return self._per_patient("AllergyIntolerance", health_id, filters)

    def diagnostic_reports(self, health_id: str, filters: Optional[Mapping[str, Any]] = None) -> Json:
        return self._per_patient("DiagnosticReport", health_id, filters)

    def conditions(self, health_id: str, filters: Optional[Mapping[str, Any]] = None) -> Json:
        return self._per_patient("Condition", health_id, filters)

    def patient_everything(self, health_id: str, params: Optional[Mapping[str, Any]] = None) -> Json:
        _required("fhir.patient_everything", health_id=health_id)
        return self._all_pages(f"/api/v1/sdk/patients/{_q(health_id)}/fhir/$everything", params)

    def search(self, resource_type: str, params: Optional[Mapping[str, Any]] = None) -> Json:
        """A FHIR search on /api/fhir/R4, every page."""
        _required("fhir.search", resource_type=resource_type)
        return self._all_pages(f"/api/fhir/R4/{_q(resource_type)}", params)

    def read(self, resource_type: str, id: str) -> Json:
        _required("fhir.read", resource_type=resource_type, id=id)
        return self._get(f"/api/fhir/R4/{_q(resource_type)}/{_q(id)}")


def _next_link(bundle: Json) -> Optional[str]:
    return next((l.get("url") for l in bundle.get("link") or [] if l.get("relation") == "next"), None)


class Webhooks(_Module):
    verify_signature = staticmethod(_webhooks.verify_signature)
    parse_event = staticmethod(_webhooks.parse_event)

    def subscribe(self, callback_url: str, events: List[str], description: str = "") -> Json:
        """Subscribes an HTTPS endpoint; the answer's ``webhook_secret`` is shown only this once."""
        _required("webhooks.subscribe", callback_url=callback_url, events=events)
        return self._post("/api/v1/connect/webhooks/subscriptions", {"callback_url": callback_url, "subscribed_events": list(events), "description": description})

    def list(self) -> Json:
        return self._get("/api/v1/connect/webhooks/subscriptions")

    def unsubscribe(self, subscription_id: str) -> None:
        _required("webhooks.unsubscribe", subscription_id=subscription_id)
        self._http.request("DELETE", f"/api/v1/connect/webhooks/subscriptions/{_q(subscription_id)}")

    def replay(self, event_id: str) -> Json:
        _required("webhooks.replay", event_id=event_id)
        return self._post(f"/api/v1/connect/webhooks/events/{_q(event_id)}/replay", idempotent=False)

    def rotate_secret(self, subscription_id: str, overlap_seconds: Optional[int] = None) -> Json:
        """Replaces the subscription's signing secret (``webhook_secret``, shown only this once). For
        ``overlap_seconds`` (server default 86400; 0: none) deliveries are signed with both secrets."""
        _required("webhooks.rotate_secret", subscription_id=subscription_id)
        return self._post(f"/api/v1/connect/webhooks/subscriptions/{_q(subscription_id)}/rotate-secret", _overlap(overlap_seconds))


class Inventory(_Module):
    def pharmacy_stock(self, facility_id: Optional[str] = None, medication: Optional[str] = None, below_reorder_level: Optional[bool] = None,
                       limit: Optional[int] = None, offset: Optional[int] = None) -> Json:
        """Stock lines by facility and medication, with their batches (``next_offset`` pages)."""
        return self._get("/api/v1/connect/pharmacy/stock", {"facility_id": facility_id, "medication": medication,
                                                               "below_reorder_level": below_reorder_level, "limit": limit, "offset": offset})

    def blood_inventory(self, facility_id: Optional[str] = None, blood_group: Optional[str] = None, component: Optional[str] = None) -> Json:
        return self._get("/api/v1/connect/blood-bank/inventory", {"facility_id": facility_id, "blood_group": blood_group, "component": component})


class Payments(_Module):
    def reconciliation(self, date: str, facility_id: Optional[str] = None, time_zone: Optional[str] = None) -> Json:
        """The day's payments (``date`` YYYY-MM-DD) with totals and the ones that do not reconcile."""
        _required("payments.reconciliation", date=date)
        return self._get("/api/v1/connect/payments/reconciliation", {"date": date, "facility_id": facility_id, "time_zone": time_zone})


class Pont:
    """``Pont(client_id=..., client_secret=..., environment="sandbox", base_url=None)``: fetches its token now
    (AuthenticationError on bad credentials), then refreshes it 60 s before expiry."""

    def __init__(self, client_id: str, client_secret: str, environment: str = "sandbox", base_url: Optional[str] = None,
                 max_retries: int = 3, timeout: float = 30.0, backoff: float = 0.5, sender: Optional[Sender] = None) -> None:
        _required("Pont", client_id=client_id, client_secret=client_secret)
        if base_url is None and environment not in ENVIRONMENTS:
            raise ValidationError("Pont: environment must be sandbox or production")
        self._http = Transport(client_id, client_secret, base_url or ENVIRONMENTS[environment], max_retries, timeout, backoff, sender)
        self._http.access_token()
        self.auth = Auth(self._http)
        self.health_ids = HealthIds(self._http)
        self.patients = Patients(self._http)
        self.consents = Consents(self._http)
        self.records = Records(self._http)
        self.fhir = Fhir(self._http)
        self.webhooks = Webhooks(self._http)
        self.inventory = Inventory(self._http)
        self.payments = Payments(self._http)

    def __repr__(self) -> str:  # never the secret
        return f"Pont(base_url={self._http.base_url!r})"
