"""The entry classes (``Pont`` for an integration client, ``BridgeAgent`` for a facility's agent) and their modules, in
snake_case. Every method takes the per-call options of ``RequestOptions`` as keyword arguments."""
from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional
from urllib.parse import quote, unquote, urlsplit

from . import webhooks as _webhooks
from ._http import ApiDict, ClientCredentials, RequestInfo, ResponseInfo, Sender, Transport
from .errors import ValidationError

if TYPE_CHECKING:  # Unpack is in typing from 3.11; type checkers of 3.10 take it from typing_extensions
    try:
        from typing import Unpack
    except ImportError:
        from typing_extensions import Unpack
    from ._http import RequestOptions
    from .types import (BridgeHeartbeatAck, BridgeSyncResult, ClientSecretRotation, ConsentRequestCreated,
                        ConsentStatus, EncounterPushed, HealthIdResolveResponse, HealthIdVerifyResponse, IntrospectionResponse,
                        Jwks, LabResultPushed, MobileTokenResponse, OAuthServerMetadata, PairingCode, PatientProfile, PatientSummary,
                        PaymentReconciliationDay, PharmacyStockApplied, SdkTokenIntrospection, SmartConfiguration, TokenResponse,
                        WebhookReplay, WebhookSecretRotation, WebhookSubscriptionCreated)

ENVIRONMENTS = {"sandbox": "https://sandbox.pont.health", "production": "https://api.pont.health"}
FHIR = "/api/fhir/R4"

Json = Dict[str, Any]
Resource = Dict[str, Any]


def _required(method: str, **values: Any) -> None:
    for name, value in values.items():
        if value is None or value == "" or value == [] or value == {}:
            raise ValidationError(f"{method}: {name} is required")


def _q(value: str) -> str:
    return quote(str(value), safe="")


class Page(ApiDict):
    """One page of a list or a FHIR search (the server's answer, as a dict), and ``auto_paging_iter()``: every item
    of this page and the next ones, fetched one page at a time as the iteration reaches them."""

    def __init__(self, answer: ApiDict, items: Callable[[Json], List[Any]], next_page: Callable[[Json], Optional["Page"]]) -> None:
        super().__init__(answer)
        self.request_id, self.status, self.headers = answer.request_id, answer.status, answer.headers
        self._items = items
        self._next_page = next_page

    @property
    def data(self) -> List[Any]:
        """The items of this page."""
        return self._items(self)

    def next_page(self) -> Optional["Page"]:
        return self._next_page(self)

    def auto_paging_iter(self) -> Iterator[Any]:
        page: Optional[Page] = self
        while page is not None:
            yield from page.data
            page = page.next_page()


class _Module:
    def __init__(self, http: Transport) -> None:
        self._http = http

    def _get(self, path: str, query: Optional[Mapping[str, Any]] = None, options: Optional[Mapping[str, Any]] = None, **kw: Any) -> Any:
        return self._http.request("GET", path, query=query, options=options, **kw)

    def _post(self, path: str, body: Any = None, options: Optional[Mapping[str, Any]] = None, create: bool = True, **kw: Any) -> Any:
        """Connect and SDK POSTs: the server keeps the answer of a request with an Idempotency-Key, so one is sent."""
        return self._http.request("POST", path, body=body if body is not None else {}, options=options, create=create, **kw)

    def _cursor_page(self, path: str, query: Mapping[str, Any], items_key: str, options: Mapping[str, Any],
                     items: Optional[Callable[[Json], List[Any]]] = None) -> Page:
        """A list paged by ``next_cursor`` (sent back as ``cursor``)."""
        answer = self._get(path, query, options)

        def next_page(page: Json) -> Optional[Page]:
            cursor = page.get("next_cursor")
            return self._cursor_page(path, {**query, "cursor": cursor}, items_key, options, items) if cursor else None
        return Page(answer, items or (lambda p: p.get(items_key) or []), next_page)

    def _single_page(self, answer: ApiDict, items_key: str) -> Page:
        return Page(answer, lambda p: p.get(items_key) or [], lambda p: None)

    def _bundle(self, answer: ApiDict, options: Mapping[str, Any]) -> Page:
        """A FHIR Bundle (a searchset or a history): its resources, then those of its ``next`` link's pages."""
        def next_page(bundle: Json) -> Optional[Page]:
            link = next((l.get("url") for l in bundle.get("link") or [] if l.get("relation") == "next"), None)
            if not link:
                return None
            return self._bundle(self._http.request("GET", url=self._http.same_origin(link), options=options, accept="application/fhir+json"), options)
        return Page(answer, lambda b: [e["resource"] for e in b.get("entry") or [] if "resource" in e], next_page)


def _overlap(overlap_seconds: Optional[int]) -> Json:
    return {} if overlap_seconds is None else {"overlap_seconds": overlap_seconds}


class Auth(_Module):
    def __init__(self, http: Transport, credentials: ClientCredentials) -> None:
        super().__init__(http)
        self._credentials = credentials

    def token(self, scope: Optional[str] = None, **options: Unpack[RequestOptions]) -> TokenResponse:
        """A new access token (the client fetches and refreshes its own: this is for handing one to another process)."""
        return self._http.request("POST", "/api/v1/connect/auth/token", body=self._credentials.token_request(scope), auth=False, repeatable=True, options=options)

    def introspect(self, token: str, **options: Unpack[RequestOptions]) -> IntrospectionResponse:
        """RFC 7662 introspection of a token, as this client."""
        _required("auth.introspect", token=token)
        return self._http.request("POST", "/api/v1/connect/auth/introspect", body={"token": token}, repeatable=True, options=options)

    def introspect_current(self, **options: Unpack[RequestOptions]) -> SdkTokenIntrospection:
        """What the server knows of this client's current token (scopes, organisation, expiry)."""
        return self._get("/api/v1/sdk/token/introspect", options=options)

    def rotate_client_secret(self, overlap_seconds: Optional[int] = None, **options: Unpack[RequestOptions]) -> ClientSecretRotation:
        """Replaces this client's secret: the answer's ``client_secret`` is shown only this once, and this instance
        asks for its next tokens with it. The old secret stays valid for ``overlap_seconds`` (server default 86400;
        0: none)."""
        rotated = self._post(f"/api/v1/connect/auth/clients/{_q(self._credentials.client_id)}/rotate-secret", _overlap(overlap_seconds), options)
        self._credentials.use_secret(rotated["client_secret"])
        return rotated


class HealthIds(_Module):
    def resolve(self, fields: Mapping[str, Any], **options: Unpack[RequestOptions]) -> HealthIdResolveResponse:
        """Finds the patient by ``health_id``, or by ``first_name``, ``last_name``, ``date_of_birth`` (creating them)."""
        _required("health_ids.resolve", fields=fields)
        if not fields.get("health_id"):
            _required("health_ids.resolve", first_name=fields.get("first_name"))
        return self._post("/api/v1/connect/patients/resolve", dict(fields), options)

    def verify(self, health_id: str, purpose: Optional[str] = None, external_reference: Optional[str] = None,
               **options: Unpack[RequestOptions]) -> HealthIdVerifyResponse:
        _required("health_ids.verify", health_id=health_id)
        return self._get(f"/api/v1/connect/patients/verify/{_q(health_id)}", {"purpose": purpose, "external_reference": external_reference}, options)


class Patients(_Module):
    def get_summary(self, health_id: str, **options: Unpack[RequestOptions]) -> PatientSummary:
        _required("patients.get_summary", health_id=health_id)
        return self._get(f"/api/v1/sdk/patients/{_q(health_id)}/summary", options=options)

    def search(self, health_id: str, purpose: Optional[str] = None, external_reference: Optional[str] = None,
               **options: Unpack[RequestOptions]) -> PatientProfile:
        _required("patients.search", health_id=health_id)
        return self._get("/api/v1/connect/patient/search", {"health_id": health_id, "purpose": purpose, "external_reference": external_reference}, options)

    def issue_pairing_code(self, health_id: str, **options: Unpack[RequestOptions]) -> PairingCode:
        """A one-time code with which the patient pairs their app (``PatientApp.sign_in``)."""
        _required("patients.issue_pairing_code", health_id=health_id)
        return self._post(f"/api/v1/connect/patient/{_q(health_id)}/mobile/pairing-code", None, options)


class Consents(_Module):
    def request(self, fields: Mapping[str, Any], **options: Unpack[RequestOptions]) -> ConsentRequestCreated:
        _required("consents.request", health_id=fields.get("health_id"), purpose=fields.get("purpose"), requested_scopes=fields.get("requested_scopes"))
        return self._post("/api/v1/sdk/consents/request", dict(fields), options)

    def grant(self, health_id: str, fields: Mapping[str, Any], **options: Unpack[RequestOptions]) -> ConsentStatus:
        _required("consents.grant", health_id=health_id, consent_type=fields.get("consent_type"), expires_at=fields.get("expires_at"))
        return self._post(f"/api/v1/connect/patient/{_q(health_id)}/consent/grant", dict(fields), options)

    def status(self, health_id: str, **options: Unpack[RequestOptions]) -> ConsentStatus:
        _required("consents.status", health_id=health_id)
        return self._get(f"/api/v1/connect/patient/{_q(health_id)}/consent", options=options)

    def revoke(self, health_id: str, fields: Optional[Mapping[str, Any]] = None, **options: Unpack[RequestOptions]) -> ConsentStatus:
        _required("consents.revoke", health_id=health_id)
        return self._post(f"/api/v1/connect/patient/{_q(health_id)}/consent/revoke", dict(fields or {}), options)

    def artefact(self, consent_id: str, **options: Unpack[RequestOptions]) -> ApiDict:
        """The signed consent artefact, ``{"artefact": "<compact JWS>"}``; verify it with ``verified_artefact`` or
        ``pont.artefacts.verify_consent_artefact``."""
        _required("consents.artefact", consent_id=consent_id)
        return self._get(f"/api/v1/connect/consents/{_q(consent_id)}/artefact", options=options)

    def verified_artefact(self, consent_id: str, **options: Unpack[RequestOptions]) -> dict:
        """The artefact, fetched and verified with Pont's key set (``/.well-known/jwks.json``): its payload, or
        ArtefactVerificationError."""
        from .artefacts import verify_consent_artefact
        artefact = self.artefact(consent_id, **options)["artefact"]
        return verify_consent_artefact(artefact, self._get("/.well-known/jwks.json", options=options))

    def revoked(self, since: str, **options: Unpack[RequestOptions]) -> ApiDict:
        """The caller's organisation's consents revoked since ``since`` (ISO date-time): ``{"items": [{consent_id, revoked_at}]}``."""
        _required("consents.revoked", since=since)
        return self._get("/api/v1/connect/consents/revoked", {"since": since}, options)


class Records(_Module):
    def get(self, health_id: str, type: Optional[str] = None, limit: Optional[int] = None, cursor: Optional[str] = None,
            since: Optional[str] = None, **options: Unpack[RequestOptions]) -> Page:
        """Records by type (``all`` by default). ``auto_paging_iter()`` yields the records of one ``type`` across
        its pages (``next_cursor``)."""
        _required("records.get", health_id=health_id)
        query = {"type": type, "limit": limit, "cursor": cursor, "since": since}
        return self._cursor_page(f"/api/v1/connect/patient/{_q(health_id)}/records", query, "records", options,
                                 lambda p: (p.get("records") or {}).get(p.get("type") or type or "", []))

    def push_encounter(self, fields: Mapping[str, Any], **options: Unpack[RequestOptions]) -> EncounterPushed:
        _required("records.push_encounter", health_id=fields.get("health_id"), encounter_type=fields.get("encounter_type"))
        return self._post("/api/v1/sdk/records/encounters", dict(fields), options)

    def push_lab_result(self, fields: Mapping[str, Any], **options: Unpack[RequestOptions]) -> LabResultPushed:
        _required("records.push_lab_result", health_id=fields.get("health_id"), test_name=fields.get("test_name"),
                  result_value=fields.get("result_value"), flagged=fields.get("flagged"))
        return self._post("/api/v1/sdk/records/lab-results", dict(fields), options)


class Fhir(_Module):
    """FHIR R4 (``/api/fhir/R4``, and the SDK's per-patient helpers). Searches and histories answer a ``Page``: the
    first Bundle, whose ``auto_paging_iter()`` yields the resources of every page, one page fetched at a time.
    Writes on /api/fhir/R4 are not deduplicated by an Idempotency-Key: they are retried only with the caller's
    ``idempotency_key`` (safe for ``delete``: deleting what is gone succeeds)."""

    def _fhir(self, method: str, path: str, query: Optional[Mapping[str, Any]] = None, body: Any = None,
              options: Optional[Mapping[str, Any]] = None, headers: Optional[Mapping[str, str]] = None, repeatable: Optional[bool] = None) -> Any:
        opts = dict(options or {})
        if headers:
            opts["headers"] = {**headers, **(opts.get("headers") or {})}
        return self._http.request(method, path, query=query, body=body, options=opts, accept="application/fhir+json",
                                  content_type="application/fhir+json", repeatable=repeatable)

    def _search(self, path: str, params: Optional[Mapping[str, Any]], options: Mapping[str, Any]) -> Page:
        return self._bundle(self._fhir("GET", path, params, options=options), options)

    def _per_patient(self, type_: str, health_id: str, filters: Optional[Mapping[str, Any]], options: Mapping[str, Any]) -> Page:
        _required(f"fhir.{type_}", health_id=health_id)
        return self._search(f"/api/v1/sdk/patients/{_q(health_id)}/fhir/{type_}", filters, options)

    def medication_requests(self, health_id: str, filters: Optional[Mapping[str, Any]] = None, **options: Unpack[RequestOptions]) -> Page:
        return self._per_patient("MedicationRequest", health_id, filters, options)

    def allergy_intolerances(self, health_id: str, filters: Optional[Mapping[str, Any]] = None, **options: Unpack[RequestOptions]) -> Page:
        return self._per_patient("AllergyIntolerance", health_id, filters, options)

    def diagnostic_reports(self, health_id: str, filters: Optional[Mapping[str, Any]] = None, **options: Unpack[RequestOptions]) -> Page:
        return self._per_patient("DiagnosticReport", health_id, filters, options)

    def conditions(self, health_id: str, filters: Optional[Mapping[str, Any]] = None, **options: Unpack[RequestOptions]) -> Page:
        return self._per_patient("Condition", health_id, filters, options)

    def patient_everything(self, health_id: str, params: Optional[Mapping[str, Any]] = None, **options: Unpack[RequestOptions]) -> Page:
        """$everything of a patient named by Health ID (SDK)."""
        _required("fhir.patient_everything", health_id=health_id)
        return self._search(f"/api/v1/sdk/patients/{_q(health_id)}/fhir/$everything", params, options)

    def everything(self, patient_id: str, params: Optional[Mapping[str, Any]] = None, **options: Unpack[RequestOptions]) -> Page:
        """Patient/{id}/$everything."""
        _required("fhir.everything", patient_id=patient_id)
        return self._search(f"{FHIR}/Patient/{_q(patient_id)}/$everything", params, options)

    def search(self, resource_type: str, params: Optional[Mapping[str, Any]] = None, **options: Unpack[RequestOptions]) -> Page:
        """A search on /api/fhir/R4/{type} (a list value repeats the parameter)."""
        _required("fhir.search", resource_type=resource_type)
        return self._search(f"{FHIR}/{_q(resource_type)}", params, options)

    def search_post(self, resource_type: str, params: Optional[Mapping[str, Any]] = None, **options: Unpack[RequestOptions]) -> Page:
        """The same search sent as a form (POST _search): parameters stay out of URLs and logs."""
        _required("fhir.search_post", resource_type=resource_type)
        form = self._http.url("", params)[len(self._http.base_url) + 1:].encode("ascii")
        answer = self._http.request("POST", f"{FHIR}/{_q(resource_type)}/_search", raw_body=form, content_type="application/x-www-form-urlencoded",
                                    accept="application/fhir+json", options=options, repeatable=True)
        return self._bundle(answer, options)

    def search_compartment(self, patient_id: str, resource_type: str, params: Optional[Mapping[str, Any]] = None,
                           **options: Unpack[RequestOptions]) -> Page:
        """Patient/{id}/{type}: the patient's resources of one type."""
        _required("fhir.search_compartment", patient_id=patient_id, resource_type=resource_type)
        return self._search(f"{FHIR}/Patient/{_q(patient_id)}/{_q(resource_type)}", params, options)

    def read(self, resource_type: str, id: str, **options: Unpack[RequestOptions]) -> Resource:
        _required("fhir.read", resource_type=resource_type, id=id)
        return self._fhir("GET", f"{FHIR}/{_q(resource_type)}/{_q(id)}", options=options)

    def vread(self, resource_type: str, id: str, version_id: str, **options: Unpack[RequestOptions]) -> Resource:
        _required("fhir.vread", resource_type=resource_type, id=id, version_id=version_id)
        return self._fhir("GET", f"{FHIR}/{_q(resource_type)}/{_q(id)}/_history/{_q(version_id)}", options=options)

    def history(self, resource_type: str, id: Optional[str] = None, params: Optional[Mapping[str, Any]] = None,
                **options: Unpack[RequestOptions]) -> Page:
        """Versions of one resource (with ``id``) or of a type, newest first."""
        _required("fhir.history", resource_type=resource_type)
        path = f"{FHIR}/{_q(resource_type)}" + (f"/{_q(id)}" if id else "") + "/_history"
        return self._search(path, params, options)

    def create(self, resource: Resource, if_none_exist: Optional[str] = None, **options: Unpack[RequestOptions]) -> Resource:
        """Creates ``resource``; with ``if_none_exist`` (search criteria) only when none matches."""
        _required("fhir.create", resource_type=(resource or {}).get("resourceType"))
        headers = {"If-None-Exist": if_none_exist} if if_none_exist else None
        return self._fhir("POST", f"{FHIR}/{_q(resource['resourceType'])}", body=resource, options=options, headers=headers)

    def update(self, resource: Resource, if_match: Optional[str] = None, **options: Unpack[RequestOptions]) -> Resource:
        """Replaces (or creates) the resource under its ``id``."""
        _required("fhir.update", resource_type=(resource or {}).get("resourceType"), id=(resource or {}).get("id"))
        headers = {"If-Match": if_match} if if_match else None
        return self._fhir("PUT", f"{FHIR}/{_q(resource['resourceType'])}/{_q(resource['id'])}", body=resource, options=options, headers=headers)

    def conditional_update(self, resource: Resource, criteria: Mapping[str, Any], **options: Unpack[RequestOptions]) -> Resource:
        """PUT /{type}?criteria: updates the one match, or creates when none matches (412 when several do)."""
        _required("fhir.conditional_update", resource_type=(resource or {}).get("resourceType"), criteria=criteria)
        return self._fhir("PUT", f"{FHIR}/{_q(resource['resourceType'])}", criteria, body=resource, options=options)

    def patch(self, resource_type: str, id: str, operations: List[Json], if_match: Optional[str] = None,
              **options: Unpack[RequestOptions]) -> Resource:
        """A JSON Patch (RFC 6902)."""
        _required("fhir.patch", resource_type=resource_type, id=id, operations=operations)
        headers = {"If-Match": if_match} if if_match else None
        return self._http.request("PATCH", f"{FHIR}/{_q(resource_type)}/{_q(id)}", body=list(operations), content_type="application/json-patch+json",
                                  accept="application/fhir+json", options={**options, "headers": {**(headers or {}), **(options.get("headers") or {})}})

    def conditional_patch(self, resource_type: str, params: Mapping[str, Any], operations: List[Json], **options: Unpack[RequestOptions]) -> Resource:
        """PATCH /{type}?params: a JSON Patch of the one resource the search matches (412 when several do)."""
        _required("fhir.conditional_patch", resource_type=resource_type, params=params, operations=operations)
        return self._http.request("PATCH", f"{FHIR}/{_q(resource_type)}", query=params, body=list(operations), content_type="application/json-patch+json",
                                  accept="application/fhir+json", options=options)

    def validate(self, resource: Resource, id: Optional[str] = None, mode: Optional[str] = None, **options: Unpack[RequestOptions]) -> Json:
        """$validate: the OperationOutcome of the server's checks, nothing stored. Without ``id``, as a new resource;
        with ``id``, against the stored one (``mode`` update, the default, or delete). No effect: retried like a GET."""
        _required("fhir.validate", resource_type=(resource or {}).get("resourceType"))
        path = f"{FHIR}/{_q(resource['resourceType'])}" + (f"/{_q(id)}" if id else "") + "/$validate"
        return self._fhir("POST", path, {"mode": mode}, body=resource, options=options, repeatable=True)

    def delete(self, resource_type: str, id: str, if_match: Optional[str] = None, **options: Unpack[RequestOptions]) -> ApiDict:
        """Deletes (history is kept). Not retried after a lost answer unless ``idempotency_key`` is given."""
        _required("fhir.delete", resource_type=resource_type, id=id)
        headers = {"If-Match": if_match} if if_match else None
        return self._fhir("DELETE", f"{FHIR}/{_q(resource_type)}/{_q(id)}", options=options, headers=headers)

    def conditional_delete(self, resource_type: str, params: Mapping[str, Any], **options: Unpack[RequestOptions]) -> ApiDict:
        """DELETE /{type}?params: deletes the one resource the search matches (none: nothing deleted; several: 412)."""
        _required("fhir.conditional_delete", resource_type=resource_type, params=params)
        return self._fhir("DELETE", f"{FHIR}/{_q(resource_type)}", params, options=options)

    def transaction(self, bundle: Json, **options: Unpack[RequestOptions]) -> Json:
        """A ``transaction`` (all or nothing) or ``batch`` Bundle."""
        _required("fhir.transaction", bundle=bundle)
        return self._fhir("POST", FHIR, body=bundle, options=options)

    def capabilities(self, **options: Unpack[RequestOptions]) -> Json:
        """The CapabilityStatement (GET /metadata)."""
        return self._fhir("GET", f"{FHIR}/metadata", options=options)


class Bulk(_Module):
    """Bulk Data export (FHIR Bulk Data Access 2.0): start, poll, read the files, cancel."""

    def export(self, level: str = "system", group_id: Optional[str] = None, params: Optional[Mapping[str, Any]] = None,
               **options: Unpack[RequestOptions]) -> ApiDict:
        """Starts an export of everything the client may read (``system``), of every patient (``patient``) or of a
        Group's members (``group``, with ``group_id``); ``params``: ``_type``, ``_since``, ``_typeFilter``,
        ``_outputFormat``. Answers ``{"id", "status_url"}``. It starts a job, so it is not retried without the
        caller's ``idempotency_key`` (a repeat would meet the running export: 429)."""
        if level not in ("system", "patient", "group"):
            raise ValidationError("bulk.export: level must be system, patient or group")
        if level == "group":
            _required("bulk.export", group_id=group_id)
        path = {"system": f"{FHIR}/$export", "patient": f"{FHIR}/Patient/$export"}.get(level) or f"{FHIR}/Group/{_q(group_id or '')}/$export"
        opts = {**options, "headers": {"Prefer": "respond-async", **(options.get("headers") or {})}}
        answer = self._http.request("GET", path, query=params, options=opts, accept="application/fhir+json", repeatable=False)
        status_url = answer.headers.get("content-location", "")
        result = ApiDict({"id": unquote(status_url.rstrip("/").rsplit("/", 1)[-1]), "status_url": status_url})
        result.request_id, result.status, result.headers = answer.request_id, answer.status, answer.headers
        return result

    def status(self, id: str, **options: Unpack[RequestOptions]) -> ApiDict:
        """``{"status": "in-progress", "progress", "retry_after"}`` (the server's X-Progress and when to ask again) or
        ``{"status": "completed", "manifest"}`` (its ``output`` lists the files' ``url``)."""
        _required("bulk.status", id=id)
        answer = self._http.request("GET", f"{FHIR}/$export-status/{_q(id)}", options=options, accept="application/fhir+json")
        if answer.status == 202:
            retry_after = answer.headers.get("retry-after")
            result = ApiDict({"status": "in-progress", "progress": answer.headers.get("x-progress"),
                              "retry_after": float(retry_after) if retry_after and retry_after.isdigit() else None})
        else:
            result = ApiDict({"status": "completed", "manifest": dict(answer)})
        result.request_id, result.status, result.headers = answer.request_id, answer.status, answer.headers
        return result

    def cancel(self, id: str, **options: Unpack[RequestOptions]) -> ApiDict:
        """Cancels an export (or deletes a finished one) and its files."""
        _required("bulk.cancel", id=id)
        return self._http.request("DELETE", f"{FHIR}/$export-status/{_q(id)}", options=options, accept="application/fhir+json")

    def file(self, url: str, **options: Unpack[RequestOptions]) -> Iterator[Resource]:
        """The resources of one output file of the manifest (its ``url``), parsed line by line as they arrive (a
        generator: the file is never held whole)."""
        _required("bulk.file", url=url)
        answer = self._http.request("GET", url=self._http.same_origin(url), options=options, accept="application/fhir+ndjson", stream=True)
        try:
            for line in answer:
                if line.strip():
                    yield json.loads(line)
        finally:
            answer.close()


class Webhooks(_Module):
    verify_signature = staticmethod(_webhooks.verify_signature)
    parse_event = staticmethod(_webhooks.parse_event)

    def subscribe(self, callback_url: str, events: List[str], description: str = "", **options: Unpack[RequestOptions]) -> WebhookSubscriptionCreated:
        """Subscribes an HTTPS endpoint; the answer's ``webhook_secret`` is shown only this once."""
        _required("webhooks.subscribe", callback_url=callback_url, events=events)
        return self._post("/api/v1/connect/webhooks/subscriptions", {"callback_url": callback_url, "subscribed_events": list(events), "description": description}, options)

    def list(self, **options: Unpack[RequestOptions]) -> Page:
        """The subscriptions (``subscriptions``; iterating yields each)."""
        return self._single_page(self._get("/api/v1/connect/webhooks/subscriptions", options=options), "subscriptions")

    def unsubscribe(self, subscription_id: str, **options: Unpack[RequestOptions]) -> ApiDict:
        """Not retried after a lost answer unless ``idempotency_key`` is given (a repeat would answer 404)."""
        _required("webhooks.unsubscribe", subscription_id=subscription_id)
        return self._http.request("DELETE", f"/api/v1/connect/webhooks/subscriptions/{_q(subscription_id)}", options=options)

    def replay(self, event_id: str, **options: Unpack[RequestOptions]) -> WebhookReplay:
        _required("webhooks.replay", event_id=event_id)
        return self._post(f"/api/v1/connect/webhooks/events/{_q(event_id)}/replay", None, options)

    def rotate_secret(self, subscription_id: str, overlap_seconds: Optional[int] = None, **options: Unpack[RequestOptions]) -> WebhookSecretRotation:
        """Replaces the subscription's signing secret (``webhook_secret``, shown only this once). For
        ``overlap_seconds`` (server default 86400; 0: none) deliveries are signed with both secrets."""
        _required("webhooks.rotate_secret", subscription_id=subscription_id)
        return self._post(f"/api/v1/connect/webhooks/subscriptions/{_q(subscription_id)}/rotate-secret", _overlap(overlap_seconds), options)

    def deliveries(self, status: Optional[str] = None, subscription_id: Optional[str] = None, limit: Optional[int] = None,
                   cursor: Optional[str] = None, **options: Unpack[RequestOptions]) -> Page:
        """Delivery history, newest first (iterating yields every delivery, page by page)."""
        query = {"status": status, "subscription_id": subscription_id, "limit": limit, "cursor": cursor}
        return self._cursor_page("/api/v1/connect/webhooks/deliveries", query, "deliveries", options)

    def event_deliveries(self, event_id: str, **options: Unpack[RequestOptions]) -> Page:
        """Every delivery of one event, with its attempts."""
        _required("webhooks.event_deliveries", event_id=event_id)
        return self._single_page(self._get(f"/api/v1/connect/webhooks/events/{_q(event_id)}/deliveries", options=options), "deliveries")


class Inventory(_Module):
    def pharmacy_stock(self, facility_id: Optional[str] = None, medication: Optional[str] = None, below_reorder_level: Optional[bool] = None,
                       limit: Optional[int] = None, offset: Optional[int] = None, **options: Unpack[RequestOptions]) -> Page:
        """Stock lines by facility and medication, with their batches (iterating follows ``next_offset``)."""
        query = {"facility_id": facility_id, "medication": medication, "below_reorder_level": below_reorder_level, "limit": limit, "offset": offset}

        def page(q: Mapping[str, Any]) -> Page:
            return Page(self._get("/api/v1/connect/pharmacy/stock", q, options), lambda p: p.get("items") or [],
                        lambda p: page({**q, "offset": p["next_offset"]}) if p.get("next_offset") is not None else None)
        return page(query)

    def update_pharmacy_stock(self, fields: Mapping[str, Any], **options: Unpack[RequestOptions]) -> PharmacyStockApplied:
        """Sets stock levels."""
        _required("inventory.update_pharmacy_stock", items=fields.get("items"))
        return self._http.request("PUT", "/api/v1/connect/pharmacy/stock", body=dict(fields), options=options)

    def blood_inventory(self, facility_id: Optional[str] = None, blood_group: Optional[str] = None, component: Optional[str] = None,
                        **options: Unpack[RequestOptions]) -> Page:
        answer = self._get("/api/v1/connect/blood-bank/inventory", {"facility_id": facility_id, "blood_group": blood_group, "component": component}, options)
        return self._single_page(answer, "items")


class Payments(_Module):
    def reconciliation(self, date: str, facility_id: Optional[str] = None, time_zone: Optional[str] = None,
                       **options: Unpack[RequestOptions]) -> PaymentReconciliationDay:
        """The day's payments (``date`` YYYY-MM-DD) with totals and the ones that do not reconcile."""
        _required("payments.reconciliation", date=date)
        return self._get("/api/v1/connect/payments/reconciliation", {"date": date, "facility_id": facility_id, "time_zone": time_zone}, options)


class Discovery(_Module):
    """Discovery documents: public, sent without a token (none is fetched for them)."""

    def smart_configuration(self, **options: Unpack[RequestOptions]) -> SmartConfiguration:
        """SMART App Launch configuration (/.well-known/smart-configuration): how SMART Backend Services authenticate."""
        return self._get("/.well-known/smart-configuration", options=options, auth=False)

    def fhir_smart_configuration(self, **options: Unpack[RequestOptions]) -> SmartConfiguration:
        """The same SMART configuration, under the FHIR base (/api/fhir/R4/.well-known/smart-configuration)."""
        return self._get(f"{FHIR}/.well-known/smart-configuration", options=options, auth=False)

    def oauth_server_metadata(self, **options: Unpack[RequestOptions]) -> OAuthServerMetadata:
        """OAuth 2.0 authorization server metadata (RFC 8414)."""
        return self._get("/.well-known/oauth-authorization-server", options=options, auth=False)

    def jwks(self, **options: Unpack[RequestOptions]) -> Jwks:
        """The public keys that verify Pont's access tokens (RS256)."""
        return self._get("/.well-known/jwks.json", options=options, auth=False)

    def openapi(self, **options: Unpack[RequestOptions]) -> Json:
        """The server's OpenAPI 3.1 document."""
        return self._get("/api/openapi.json", options=options, auth=False)


class System(_Module):
    """Probes: public, sent without a token. Each answers ``{"status", "checks", "mappings_version"}``."""

    def healthz(self, **options: Unpack[RequestOptions]) -> Json:
        """Liveness: ``{"status": "ok"}`` while the process is up."""
        return self._get("/healthz", options=options, auth=False)

    def readyz(self, **options: Unpack[RequestOptions]) -> Json:
        """Readiness: ``status`` ``ok`` once the database answers. Not ready is a 503, retried like any GET, then a
        ServerError (its ``body`` is the answer): pass ``max_retries=0`` for a probe."""
        return self._get("/readyz", options=options, auth=False)


class Demo(_Module):
    def reset(self, **options: Unpack[RequestOptions]) -> Json:
        """Wipes and seeds the demo organisation (development and sandbox only; production: NotFoundError). Sent with
        this client's token: in development the route is open (the token is ignored); in sandbox the client must be an
        operator's (``pont clients create --all-patients``; any other: AuthorizationError). The demo's clients are
        replaced: use the answer's ``clients`` from then on. Not retried without the caller's ``idempotency_key`` (the
        server does not deduplicate it; a reset asked for while another runs is a ConflictError with Retry-After)."""
        return self._http.request("POST", "/api/demo/reset", body={}, options=options)


def _transport(base_url: Optional[str], environment: str, **settings: Any) -> Transport:
    if base_url is None and environment not in ENVIRONMENTS:
        raise ValidationError("environment must be sandbox or production")
    parts = urlsplit(base_url or "")
    if base_url is not None and (parts.scheme not in ("http", "https") or not parts.hostname):
        raise ValidationError("base_url must be an http(s) URL")
    return Transport(base_url or ENVIRONMENTS[environment], **settings)


class _Client:
    """Closing: ``close()``, or ``with`` (kept-alive connections are closed)."""
    _http: Transport

    def close(self) -> None:
        self._http.pool.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:  # never a secret
        return f"{type(self).__name__}(base_url={self._http.base_url!r})"


class Pont(_Client):
    """An integration client. Two ways to make one, with the same arguments:

    - ``Pont.create(client_id=..., client_secret=..., environment="sandbox", base_url=None, ...)``, eager: checks the
      credentials with one token request before it returns (a wrong secret or an unknown client: AuthenticationError,
      at once). The quick starts use it.
    - ``Pont(client_id=..., client_secret=..., environment="sandbox", base_url=None, ...)``, lazy: no request is made
      here; the first call that needs a token fetches it (bad credentials: AuthenticationError from that call).

    Either way the token is cached and refreshed 60 s before expiry. Settings (every call's defaults; each call may override them, see RequestOptions):
    ``max_retries`` (3), ``timeout`` (30 s per attempt), ``connect_timeout`` (10 s), ``deadline`` (120 s per call),
    ``backoff`` (0.5 s) and ``max_backoff`` (8 s). ``on_request``/``on_response`` are hooks (RequestInfo,
    ResponseInfo) for logging. ``sleep``, ``clock`` (monotonic seconds), ``random`` and ``sender`` are for tests
    (with a call's ``cancel`` event, the real ``time.sleep`` becomes ``cancel.wait``; an injected one is called as it is).
    """

    def __init__(self, client_id: str, client_secret: str, environment: str = "sandbox", base_url: Optional[str] = None, *,
                 max_retries: int = 3, timeout: float = 30.0, connect_timeout: float = 10.0, deadline: float = 120.0,
                 backoff: float = 0.5, max_backoff: float = 8.0, sender: Optional[Sender] = None,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                 random: Optional[Callable[[], float]] = None, on_request: Optional[Callable[[RequestInfo], None]] = None,
                 on_response: Optional[Callable[[ResponseInfo], None]] = None) -> None:
        _required("Pont", client_id=client_id, client_secret=client_secret)
        self._http = _transport(base_url, environment, max_retries=max_retries, timeout=timeout, connect_timeout=connect_timeout,
                                deadline=deadline, backoff=backoff, max_backoff=max_backoff, sender=sender, sleep=sleep, clock=clock,
                                on_request=on_request, on_response=on_response, **({"random": random} if random else {}))
        credentials = ClientCredentials(self._http, client_id, client_secret)
        self._http.credentials = credentials
        self.auth = Auth(self._http, credentials)
        self.health_ids = HealthIds(self._http)
        self.patients = Patients(self._http)
        self.consents = Consents(self._http)
        self.records = Records(self._http)
        self.fhir = Fhir(self._http)
        self.webhooks = Webhooks(self._http)
        self.inventory = Inventory(self._http)
        self.payments = Payments(self._http)
        self.bulk = Bulk(self._http)
        self.discovery = Discovery(self._http)
        self.system = System(self._http)
        self.demo = Demo(self._http)

    @classmethod
    def create(cls, client_id: str, client_secret: str, environment: str = "sandbox", base_url: Optional[str] = None, *,
               max_retries: int = 3, timeout: float = 30.0, connect_timeout: float = 10.0, deadline: float = 120.0,
               backoff: float = 0.5, max_backoff: float = 8.0, sender: Optional[Sender] = None,
               sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
               random: Optional[Callable[[], float]] = None, on_request: Optional[Callable[[RequestInfo], None]] = None,
               on_response: Optional[Callable[[ResponseInfo], None]] = None) -> "Pont":
        """Eager: the constructor's arguments, and the credentials checked now with one token request (the token is
        kept for the calls that follow). A wrong secret or an unknown client raises AuthenticationError here (the
        client's connections closed)."""
        pont = cls(client_id, client_secret, environment, base_url, max_retries=max_retries, timeout=timeout,
                   connect_timeout=connect_timeout, deadline=deadline, backoff=backoff, max_backoff=max_backoff, sender=sender,
                   sleep=sleep, clock=clock, random=random, on_request=on_request, on_response=on_response)
        try:
            pont._http.credentials(False)
        except BaseException:
            pont.close()
            raise
        return pont


class BridgeAgent(_Client):
    """A Bridge agent of a facility: ``BridgeAgent(agent_id=..., agent_key=..., facility_id=..., base_url=...)``. No
    request is made here. Every request carries the agent's id, key and the time; ``clock_skew`` (seconds, server
    minus local: a 401 says the server's time) corrects a wrong clock. Settings as ``Pont``'s."""

    def __init__(self, agent_id: str, agent_key: str, facility_id: str, environment: str = "sandbox", base_url: Optional[str] = None, *,
                 clock_skew: float = 0.0, wall_clock: Callable[[], float] = time.time, **settings: Any) -> None:
        _required("BridgeAgent", agent_id=agent_id, agent_key=agent_key, facility_id=facility_id)
        self.agent_id = agent_id
        self.facility_id = facility_id
        self.clock_skew = clock_skew
        self._http = _transport(base_url, environment, **settings)
        self._http.credentials = lambda force: {"X-Bridge-Agent-ID": agent_id, "X-Bridge-Agent-Key": agent_key,
                                                "X-Bridge-Timestamp": str(int(wall_clock() + self.clock_skew))}

    def heartbeat(self, version: str, **options: Unpack[RequestOptions]) -> BridgeHeartbeatAck:
        """Records the contact and the agent's software ``version``; the answer's ``config`` says how often to sync."""
        _required("bridge.heartbeat", version=version)
        body = {"agent_id": self.agent_id, "facility_id": self.facility_id, "version": version}
        return self._http.request("POST", "/api/v1/bridge/heartbeat", body=body, options=options, repeatable=True)

    def sync(self, resources: List[Resource], batch_id: Optional[str] = None, groups: Optional[List[List[int]]] = None, **options: Unpack[RequestOptions]) -> BridgeSyncResult:
        """Sends a batch (at most 1000 resources). ``batch_id`` (a new one by default; keep it until the answer is
        stored) is also sent as the Idempotency-Key: a resend after a lost answer gets the first answer. ``groups``:
        lists of indexes in ``resources`` written together or not at all (an HL7 message's resources)."""
        _required("bridge.sync", resources=resources)
        batch_id = batch_id or options.get("idempotency_key") or str(uuid.uuid4())
        body: Dict[str, Any] = {"batch_id": batch_id, "resources": list(resources)}
        if groups is not None:
            body["groups"] = [list(group) for group in groups]
        return self._http.request("POST", "/api/v1/bridge/sync", body=body, options={**options, "idempotency_key": batch_id})


class _PatientToken:
    """The Authorization of a patient's app: its ``pat_`` token, which is not renewed (a 401: expired or signed out)."""
    renewable = False

    def __init__(self, token: Optional[str]) -> None:
        self.value = token or None

    def __call__(self, force: bool) -> Dict[str, str]:
        if not self.value:
            raise ValidationError("PatientApp: no patient token (sign_in(health_id, code) first, or pass token=)")
        return {"Authorization": "Bearer " + self.value}


class PatientApp(_Client):
    """A patient's own app (the /api/v1/mobile routes): the patient's consents and access log, with the patient's
    ``pat_`` token, not an integrator's credentials: ``PatientApp(base_url=..., token=None)``. Pair it once with
    ``sign_in(health_id, code)`` (the code an organisation gave the patient in person:
    ``pont.patients.issue_pairing_code``), or construct it with a stored ``token``. No request is made here. Writes
    (sign-in, answers, revocations, sign-out) are not deduplicated by the server: sent once, retried only with the
    caller's ``idempotency_key``; reads are retried like any GET. Settings as ``Pont``'s."""

    def __init__(self, environment: str = "sandbox", base_url: Optional[str] = None, token: Optional[str] = None, **settings: Any) -> None:
        self._http = _transport(base_url, environment, **settings)
        self._token = _PatientToken(token)
        self._http.credentials = self._token
        self._api = _Module(self._http)

    @property
    def signed_in(self) -> bool:
        """Whether the app holds a patient token (it may still have expired or been revoked)."""
        return self._token.value is not None

    def sign_in(self, health_id: str, code: str, **options: Unpack[RequestOptions]) -> MobileTokenResponse:
        """Exchanges a pairing code for a patient token (``access_token``, ``pat_...``, valid ``expires_in`` seconds),
        which this app uses from then on; store it to construct the app with ``token=`` later. A wrong, used or
        expired code is an AuthenticationError (the code is single use: not retried)."""
        _required("PatientApp.sign_in", health_id=health_id, code=code)
        answer = self._http.request("POST", "/api/v1/mobile/auth/token", body={"health_id": health_id, "code": code}, auth=False, options=options)
        self._token.value = answer["access_token"]
        return answer

    def consents(self, **options: Unpack[RequestOptions]) -> Page:
        """The patient's consents and pending requests, newest first (``items``, also ``.data``)."""
        return self._api._single_page(self._api._get("/api/v1/mobile/consents", options=options), "items")

    def approve_request(self, consent_request_id: str, approval: Optional[Mapping[str, Any]] = None, **options: Unpack[RequestOptions]) -> ConsentStatus:
        """Approves a pending consent request: the organisation that asked gets access (not one that paired this app:
        AuthorizationError). ``approval`` may narrow what was asked (``hi_types``, ``date_range``, ``expires_at``);
        wider: ValidationError, and the request stays pending."""
        _required("PatientApp.approve_request", consent_request_id=consent_request_id)
        path = f"/api/v1/mobile/consent-requests/{_q(consent_request_id)}/approve"
        if approval is None:
            return self._http.request("POST", path, options=options)
        return self._http.request("POST", path, body=dict(approval), options=options)

    def deny_request(self, consent_request_id: str, **options: Unpack[RequestOptions]) -> ConsentStatus:
        """Denies a pending consent request (already answered: ConflictError)."""
        _required("PatientApp.deny_request", consent_request_id=consent_request_id)
        return self._http.request("POST", f"/api/v1/mobile/consent-requests/{_q(consent_request_id)}/deny", options=options)

    def revoke_consent(self, consent_id: str, **options: Unpack[RequestOptions]) -> ConsentStatus:
        """Revokes one of the patient's active consents (``consent_id`` of ``consents()``; not active: ConflictError)."""
        _required("PatientApp.revoke_consent", consent_id=consent_id)
        return self._http.request("POST", f"/api/v1/mobile/consents/{_q(consent_id)}/revoke", options=options)

    def access_log(self, limit: Optional[int] = None, cursor: Optional[str] = None, **options: Unpack[RequestOptions]) -> Page:
        """Who read or changed which kind of the patient's data, when, why, break-glass or not, newest first
        (``auto_paging_iter()`` follows ``next_cursor``)."""
        return self._api._cursor_page("/api/v1/mobile/access-log", {"limit": limit, "cursor": cursor}, "items", options)

    def sign_out(self, **options: Unpack[RequestOptions]) -> ApiDict:
        """Signs the app out: the token stops working, and this app forgets it."""
        answer = self._http.request("POST", "/api/v1/mobile/auth/revoke", options=options)
        self._token.value = None
        return answer
