<?php

declare(strict_types=1);

namespace Pont;

/**
 * The interface's shapes as array types, generated from the OpenAPI document by scripts/generate-types.php: do not
 * edit. Import one with `@phpstan-import-type LabResultPush from Types` (Psalm reads them as well).
 *
 * @phpstan-type AccessLog array{items: list<array{at: string, actor: array{kind: 'organization'|'patient'|'system', organization_id: string|null, client_id: string|null}, operation: string|null, action: 'read'|'create'|'update'|'delete'|'execute', data_types: list<string>, purpose: string|null, break_glass: bool, outcome: 'allowed'|'refused'}>, next_cursor: string|null}
 * @phpstan-type AllergyRecord array{id: string, patient_id: string|null, provider_id: string|null, substance: string|null, severity: 'mild'|'moderate'|'severe'|'life_threatening'|null, status: 'active'|'inactive'|'resolved'|'unconfirmed'|'refuted'|'entered_in_error'|null, created_at: string|null}
 * @phpstan-type BloodInventory array{items: list<array{facility_id: string, blood_group: 'A+'|'A-'|'B+'|'B-'|'AB+'|'AB-'|'O+'|'O-', component: 'whole_blood'|'packed_red_cells'|'platelets'|'plasma'|'cryoprecipitate', units_available: int, units_expiring_within_7_days: int, updated_at: string}>}
 * @phpstan-type BridgeHeartbeat array{agent_id: string, facility_id: string, version: string}
 * @phpstan-type BridgeHeartbeatAck array{status: 'ok', agent_id: string, facility_id: string, version: string, server_time: string, server_timestamp: int, config: array{sync_interval_seconds: int, heartbeat_interval_seconds: int, max_batch_resources: int}}
 * @phpstan-type BridgeSyncBatch array{batch_id: string, resources: list<mixed>}
 * @phpstan-type BridgeSyncResult array{batch_id: string, agent_id: string, facility_id: string, counts: array{created: float, updated: float, unchanged: float, failed: float}, results: list<array{index: int, status: 'created'|'updated'|'unchanged'|'failed', resource_type: string|null, id: string|null, source_id: string|null, error: string|null}>}
 * @phpstan-type CdssAlert array{id: string, patient_id: string|null, encounter_id: string|null, alert_type: string|null, severity: 'high'|'moderate'|'low'|null, cdss_rule_id: string|null, detail: string|null, identified_at: string|null}
 * @phpstan-type ClientSecretRotation array{client_id: string, client_secret: string, previous_secret_expires_at: string|null}
 * @phpstan-type ClinicalNote array{id: string, visit_id: string|null, provider_id: string|null, status: 'draft'|'signed'|'amended'|null, history_of_present_illness: string|null, examination_findings: string|null, treatment_plan: string|null, signed_at: string|null, amends_note_id: string|null, created_at: string|null}
 * @phpstan-type ConsentDataClass 'patients:read'|'labs:read'|'prescriptions:read'|'documents:read'|'appointments:read'|'fhir:read'
 * @phpstan-type ConsentGrantRequest array{consent_type: ConsentType, expires_at: string, purpose?: string, scopes?: list<ConsentDataClass>, external_reference?: string}
 * @phpstan-type ConsentRequestCreate array{health_id: string, purpose: string, requested_scopes: list<ConsentDataClass>, consent_type?: ConsentType, expires_at?: string}
 * @phpstan-type ConsentRequestCreated array{consent_request_id: string, health_id: string, organization_id: string, status: 'pending', consent_type: string, requested_scopes: list<string>, purpose: string, created_at: string}
 * @phpstan-type ConsentStatus array{consent_id: string|null, health_id: string, organization_id: string, consent_type: 'full_record'|'summary'|'diagnostics'|'prescriptions'|'documents'|null, scopes: list<string>, status: 'pending'|'active'|'revoked'|'denied'|'expired'|'none', purpose: string|null, granted_at: string|null, expires_at: string|null}
 * @phpstan-type ConsentType 'full_record'|'summary'|'diagnostics'|'prescriptions'|'documents'
 * @phpstan-type Diagnosis array{id: string, patient_id: string|null, visit_id: string|null, provider_id: string|null, display_name: string|null, code_system: 'ICD-10'|'SNOMED'|'other'|null, code: string|null, snomed_code: string|null, snomed_display: string|null, status: 'active'|'recurrence'|'relapse'|'inactive'|'remission'|'resolved'|'provisional'|'differential'|'unconfirmed'|'ruled_out'|'entered_in_error'|null, is_primary: bool|null, created_at: string|null}
 * @phpstan-type EncounterPush array{health_id: string, encounter_type: string, clinical_note?: string, status?: 'planned'|'arrived'|'triaged'|'in-progress'|'onleave'|'finished'|'cancelled', class?: 'AMB'|'EMER'|'IMP'|'VR'|'HH', reason?: string, started_at?: string, ended_at?: string, alert_type?: string, severity?: 'high'|'moderate'|'low', cdss_rule_id?: string}
 * @phpstan-type EncounterPushed array{health_id: string, encounter_id: string, detected_issue_id: string|null, organization_id: string|null, created_at: string}
 * @phpstan-type Error array{status: 'error', error_code: string, message: string}
 * @phpstan-type HealthIdResolveRequest array{health_id?: string|null, first_name?: string|null, last_name?: string|null, date_of_birth?: string|null, country_code?: string|null, sex?: 'male'|'female'|'other'|null, phone_number?: string|null, purpose?: string|null, external_reference?: string|null}
 * @phpstan-type HealthIdResolveResponse array{status: 'found'|'created'|'not_found', health_id: string, patient?: PatientDemographics}
 * @phpstan-type HealthIdVerifyResponse array{valid: true, health_id: string, patient: PatientDemographics}
 * @phpstan-type Immunization array{id: string, patient_id: string|null, visit_id: string|null, vaccine: string|null, cvx_code: string|null, status: 'completed'|'entered-in-error'|'not-done'|null, status_reason: string|null, occurred_at: string|null, primary_source: bool|null, lot_number: string|null, dose_number: int|null, site: string|null, route: string|null, note: string|null}
 * @phpstan-type IntrospectionRequest array{token: string, token_type_hint?: string, client_id?: string, client_secret?: string}
 * @phpstan-type IntrospectionResponse array{active: bool, token_type?: string, scope?: string, client_id?: string, sub?: string, aud?: string, iss?: string, exp?: int, iat?: int, jti?: string}
 * @phpstan-type Jwk array{kty: string, use: string, alg: string, kid: string, n: string, e: string}
 * @phpstan-type Jwks array{keys: list<Jwk>}
 * @phpstan-type LabResult array{id: string, patient_id: string|null, visit_id: string|null, test_name: string|null, loinc_code: string|null, value: string|null, value_numeric: float|null, comparator: '<'|'<='|'>='|'>'|null, value_precision: int|null, unit: string|null, value_coded: string|null, reference_low: float|null, reference_high: float|null, reference_range_unit: string|null, reference_range_text: string|null, flag: 'N'|'A'|'AA'|'H'|'HH'|'HU'|'H>'|'L'|'LL'|'LU'|'L<'|'<'|'>'|'POS'|'NEG'|'IND'|'DET'|'ND'|'E'|'EXP'|'UNE'|'NR'|'RR'|'WR'|'S'|'R'|'I'|'MS'|'VS'|'SDD'|'NCL'|'NS'|'SYN-R'|'SYN-S'|'B'|'D'|'U'|'W'|'AC'|'IE'|'QCF'|'TOX'|'CAR'|'Carrier'|'EX'|'HX'|'LX'|null, flag_level: 'normal'|'abnormal'|'low'|'high'|'critical'|'critical_low'|'critical_high'|null, interpretation: string|null, status: 'registered'|'preliminary'|'final'|'amended'|'corrected'|'cancelled'|'entered-in-error'|'unknown'|null, effective_at: string|null, issued_at: string|null, source: string}
 * @phpstan-type LabResultPush array{health_id: string, test_name: string, result_value: string, flagged: bool, flag_level?: 'normal'|'abnormal'|'low'|'high'|'critical'|'critical_low'|'critical_high', interpretation?: string, unit?: string, loinc_code?: string, reference_low?: float, reference_high?: float, status?: 'preliminary'|'final', effective_at?: string}
 * @phpstan-type LabResultPushed array{health_id: string, lab_result_id: string, diagnostic_report_id: string, flagged: bool, flag: string, created_at: string}
 * @phpstan-type MobileTokenRequest array{health_id: string, code: string}
 * @phpstan-type MobileTokenResponse array{access_token: string, token_type: 'Bearer', expires_in: int}
 * @phpstan-type MyConsents array{items: list<ConsentStatus>}
 * @phpstan-type OAuthError array{status: 'error', error_code: string, message: string, error: 'invalid_request'|'invalid_client'|'unsupported_grant_type'|'invalid_scope', error_description: string}
 * @phpstan-type OAuthServerMetadata array{issuer: string, token_endpoint: string, introspection_endpoint: string, jwks_uri: string, grant_types_supported: list<string>, scopes_supported: list<string>}
 * @phpstan-type OperationOutcome array{resourceType: 'OperationOutcome', issue: list<array<string, mixed>>}
 * @phpstan-type PairingCode array{code: string, expires_at: string}
 * @phpstan-type PatientDemographics array{health_id: string, first_name: string|null, last_name: string|null, date_of_birth: string|null, sex: 'male'|'female'|'other'|null, country_code: string|null}
 * @phpstan-type PatientProfile array{health_id: string}
 * @phpstan-type PatientRecords array{health_id: string, type: string, records: array{alerts?: list<CdssAlert>, allergies?: list<AllergyRecord>, clinical_notes?: list<ClinicalNote>, diagnoses?: list<Diagnosis>, immunizations?: list<Immunization>, lab_results?: list<LabResult>, prescriptions?: list<Prescription>, visits?: list<Visit>, vitals?: list<Vital>}, next_cursor?: string|null, truncated?: list<string>, withheld?: list<string>}
 * @phpstan-type PatientSummary array{health_id: string, patient: array{first_name: string|null, last_name: string|null, date_of_birth: string|null, sex: 'male'|'female'|'other'|null, blood_group: 'A+'|'A-'|'B+'|'B-'|'AB+'|'AB-'|'O+'|'O-'|null}, active_medications: list<Prescription>, active_allergies: list<AllergyRecord>, recent_labs: list<LabResult>, recent_visits: list<Visit>, withheld: list<string>}
 * @phpstan-type PaymentReconciliationDay array{date: string, time_zone: string, facility_id: string|null, payments: list<array{payment_id: string, facility_id: string, paid_at: string, payer: string|null, method: 'cash'|'mobile_money'|'insurance'|'card', amount: float, currency: string, amount_due: float|null, reference: string|null, status: 'active'|'cancelled'|'draft'|'entered-in-error', reconciled: bool, problems: list<'amount_mismatch'|'currency_mismatch'|'missing_reference'>}>, totals: array{by_method: list<array{method: string, currency: string, count: int, amount: float}>, by_currency: list<array{currency: string, count: int, amount: float}>}, unreconciled: int}
 * @phpstan-type PharmacyStock array{items: list<PharmacyStockLine>, next_offset: int|null}
 * @phpstan-type PharmacyStockApplied array{facility_id: string, lines: int, created: int, changed: int, unchanged: int}
 * @phpstan-type PharmacyStockLine array{medication: array{code: string, code_system: string, display?: string|null}, quantity_on_hand: float, unit: string|null, reorder_level: float|null, batches: list<array{lot: string, expires_on: string|null, quantity: float}>, facility_id: string, updated_at: string}
 * @phpstan-type PharmacyStockUpdate array{facility_id: string, items: list<array{medication: array{code: string, code_system: string, display?: string|null}, quantity_on_hand: float, unit?: string|null, reorder_level?: float|null, batches?: list<array{lot: string, expires_on?: string|null, quantity: float}>}>}
 * @phpstan-type PortalActivity array{at: string, who: string, health_id: string|null, what: string, action: 'create'|'read'|'update'|'delete'|'execute', purpose: string|null, break_glass: bool}
 * @phpstan-type PortalAgent array{agent_id: string, facility_id: string, last_seen_at: string|null, last_version: string|null, clock_skew_seconds: int|null, revoked_at: string|null, recent_batches: list<array{batch_id: string, created_at: string, counts: array<string, mixed>|null, errors: list<string>}>}
 * @phpstan-type PortalClient array{client_id: string, name: string, organization_id: string, facility_id: string|null, scopes: list<string>, created_at: string, revoked_at: string|null, previous_secret_expires_at: string|null, last_used_at: string|null}
 * @phpstan-type PortalSession array{user: array{id: string, organization_id: string, email: string, role: 'admin'|'developer'|'viewer'}, csrf_token: string, expires_at: string}
 * @phpstan-type PortalSignIn array{email: string, password: string}
 * @phpstan-type PortalUser array{id: string, organization_id: string, email: string, role: 'admin'|'developer'|'viewer', active: bool, created_at: string}
 * @phpstan-type Prescription array{id: string, patient_id: string|null, visit_id: string|null, prescriber_id: string|null, medication: string|null, medication_code: string|null, code_system: string|null, status: 'active'|'on_hold'|'cancelled'|'completed'|'entered_in_error'|'stopped'|'draft'|'unknown'|null, intent: 'proposal'|'plan'|'order'|'original-order'|'reflex-order'|'filler-order'|'instance-order'|'option'|null, dosage_text: string|null, dose: float|null, dose_unit: string|null, frequency: int|null, period: float|null, period_unit: 's'|'min'|'h'|'d'|'wk'|'mo'|'a'|null, as_needed: bool|null, authored_at: string|null}
 * @phpstan-type SdkTokenIntrospection array{active: bool, scopes: list<string>, client_id: string, expires_at: string}
 * @phpstan-type SecretRotationRequest array{overlap_seconds?: int}
 * @phpstan-type SmartConfiguration array{token_endpoint: string, token_endpoint_auth_methods_supported: list<string>, token_endpoint_auth_signing_alg_values_supported: list<string>, grant_types_supported: list<string>, scopes_supported: list<string>, capabilities: list<string>}
 * @phpstan-type TokenRequest array{grant_type: 'client_credentials', client_id?: string, client_secret?: string, client_assertion_type?: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion?: string, scope?: string}
 * @phpstan-type TokenResponse array{access_token: string, token_type: 'Bearer', expires_in: int, scope: string}
 * @phpstan-type Visit array{id: string, patient_id: string|null, type: string|null, class: string|null, status: 'planned'|'arrived'|'triaged'|'in-progress'|'onleave'|'finished'|'cancelled'|'entered-in-error'|'unknown'|null, reason: string|null, provider_id: string|null, facility_id: string|null, started_at: string|null, ended_at: string|null, note: string|null}
 * @phpstan-type Vital array{id: string, patient_id: string|null, visit_id: string|null, type: string|null, name: string|null, value: float|null, comparator: '<'|'<='|'>='|'>'|null, systolic: float|null, diastolic: float|null, unit: string|null, status: 'registered'|'preliminary'|'final'|'amended'|'corrected'|'cancelled'|'entered-in-error'|'unknown'|null, recorded_at: string|null}
 * @phpstan-type WebhookDelivery array{id: string, event_id: string, event_type: WebhookEventType, subscription_id: string, callback_url: string, status: 'pending'|'delivered'|'exhausted'|'cancelled', round: int, attempts_made: int, next_attempt_at: string|null, attempts: list<array{round: int, attempt: int, started_at: string, duration_ms: int, status_code: int|null, error: string|null, succeeded: bool, response_excerpt: string|null}>}
 * @phpstan-type WebhookDeliveryPage array{deliveries: list<WebhookDelivery>, next_cursor: string|null}
 * @phpstan-type WebhookEventDeliveries array{event_id: string, type: WebhookEventType, created_at: string, deliveries: list<WebhookDelivery>}
 * @phpstan-type WebhookEventType 'patient.created'|'patient.updated'|'health_id.created'|'health_id.verified'|'consent.requested'|'consent.granted'|'consent.denied'|'consent.revoked'|'encounter.created'|'encounter.closed'|'lab_order.created'|'lab_result.released'|'lab_result.amended'|'prescription.issued'|'prescription.cancelled'|'prescription.dispensed'|'appointment.created'|'appointment.checked_in'|'appointment.cancelled'|'document.issued'|'document.verified'|'bridge_agent.sync_failed'
 * @phpstan-type WebhookReplay array{event_id: string, deliveries: list<array{id: string, subscription_id: string, round: int}>}
 * @phpstan-type WebhookSecretRotation array{id: string, callback_url: string, subscribed_events: list<WebhookEventType>, description: string, status: 'active', full_payload: bool, created_at: string, webhook_secret: string, previous_secret_expires_at: string|null}
 * @phpstan-type WebhookSubscription array{id: string, callback_url: string, subscribed_events: list<WebhookEventType>, description: string, status: 'active', full_payload: bool, created_at: string}
 * @phpstan-type WebhookSubscriptionCreate array{callback_url: string, subscribed_events: list<WebhookEventType>, description?: string}
 * @phpstan-type WebhookSubscriptionCreated array{id: string, callback_url: string, subscribed_events: list<WebhookEventType>, description: string, status: 'active', full_payload: bool, created_at: string, webhook_secret: string}
 */
final class Types
{
}
