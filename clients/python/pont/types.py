"""TypedDicts of the interface's shapes, generated from the OpenAPI document by scripts/generate_types.py: do not edit.

Answers are ``ApiDict``s (dicts) of these shapes; FHIR resources are plain dicts (``Dict[str, Any]``).
"""
from typing import Any, Dict, List, Literal, Optional, TypedDict, Union


class AccessLog(TypedDict):
    items: List[Dict[str, Any]]
    next_cursor: Optional[str]


class Administration(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    status: Optional[Literal['in-progress', 'not-done', 'on-hold', 'completed', 'entered-in-error', 'stopped', 'unknown']]
    status_reason: Optional[str]
    medication: Optional[str]
    medication_code: Optional[str]
    code_system: Optional[str]
    medication_codings: Optional[List[Dict[str, Any]]]
    medication_form: Optional[str]
    medication_form_code: Optional[str]
    medication_form_system: Optional[str]
    medication_ingredients: Optional[List[Dict[str, Any]]]
    prescription_id: Optional['FhirId']
    administered_at: Optional[str]
    administered_end: Optional[str]
    performer: Optional[str]
    performer_reference: Optional[str]
    reason: Optional[str]
    reason_references: Optional[List[str]]
    dosage_text: Optional[str]
    dose: Optional[float]
    dose_unit: Optional[str]
    route: Optional[str]
    site: Optional[str]
    rate_unit_code: Optional[str]
    rate: Optional[str]
    note: Optional[str]


class AdverseEvent(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    actuality: Optional[Literal['actual', 'potential']]
    event: Optional[str]
    event_code: Optional[str]
    event_system: Optional[str]
    category: Optional[str]
    category_code: Optional[str]
    category_system: Optional[str]
    date: Optional[str]
    detected: Optional[str]
    recorded_date: Optional[str]
    visit_id: Optional['FhirId']
    location: Optional[str]
    location_reference: Optional[str]
    seriousness: Optional[str]
    seriousness_code: Optional[str]
    severity: Optional[str]
    severity_code: Optional[str]
    outcome: Optional[str]
    outcome_code: Optional[str]
    resulting_condition_references: Optional[List[str]]
    resulting_conditions: Optional[str]
    recorder: Optional[str]
    recorder_reference: Optional[str]
    contributor_references: Optional[List[str]]
    suspects: Optional[List[Dict[str, Any]]]
    medical_history_references: Optional[List[str]]
    identifier_system: Optional[str]
    identifier_value: Optional[str]


class AllergyRecord(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    provider_id: Optional['FhirId']
    recorded_by: Optional[str]
    substance: Optional[str]
    severity: Optional[Literal['mild', 'moderate', 'severe', 'life_threatening']]
    status: Optional[Literal['active', 'inactive', 'resolved', 'unconfirmed', 'refuted', 'entered_in_error']]
    criticality: Optional[str]
    type: Optional[Literal['allergy', 'intolerance']]
    category: Optional[str]
    code: Optional[str]
    code_system: Optional[str]
    reactions: Optional[str]
    reaction_list: Optional[List[Dict[str, Any]]]
    onset_at: Optional[str]
    onset_text: Optional[str]
    last_occurrence_at: Optional[str]
    notes: Optional[List[Dict[str, Any]]]
    note: Optional[str]
    created_at: Optional[str]
    substance_codings: Optional[List[Dict[str, Any]]]
    clinical_status: Optional[str]
    verification_status: Optional[str]
    reaction_codings: Optional[List[Dict[str, Any]]]


class Appointment(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    status: Optional[Literal['proposed', 'pending', 'booked', 'arrived', 'fulfilled', 'cancelled', 'noshow', 'entered-in-error', 'checked-in', 'waitlist']]
    cancelation_reason: Optional[str]
    service_category: Optional[str]
    service_category_codings: Optional[List[Dict[str, Any]]]
    service_type: Optional[str]
    service_type_codings: Optional[List[Dict[str, Any]]]
    specialty: Optional[str]
    specialty_codings: Optional[List[Dict[str, Any]]]
    appointment_type: Optional[str]
    appointment_type_code: Optional[str]
    appointment_type_system: Optional[str]
    reason_references: Optional[List[str]]
    reason: Optional[str]
    reasons: Optional[List[Dict[str, Any]]]
    priority: Optional[int]
    description: Optional[str]
    start: Optional[str]
    end: Optional[str]
    minutes_duration: Optional[int]
    created: Optional[str]
    comment: Optional[str]
    patient_instruction: Optional[str]
    based_on_references: Optional[List[str]]
    requested_periods: Optional[List[Dict[str, Any]]]
    identifiers: Optional[List[Dict[str, Any]]]
    participants: Optional[List[Dict[str, Any]]]


class Assessment(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    questionnaire: Optional[str]
    status: Optional[Literal['in-progress', 'completed', 'amended', 'entered-in-error', 'stopped']]
    authored_at: Optional[str]
    author: Optional[str]
    author_reference: Optional[str]
    source_reference: Optional[str]
    based_on_references: Optional[List[str]]
    answers: Optional[List[str]]
    score: Optional[float]
    score_link_id: Optional[str]


class BloodInventory(TypedDict):
    items: List[Dict[str, Any]]


class BodyStructure(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    active: Optional[bool]
    morphology: Optional[str]
    morphology_code: Optional[str]
    morphology_system: Optional[str]
    location: Optional[str]
    location_code: Optional[str]
    location_system: Optional[str]
    location_qualifiers: Optional[str]
    location_qualifier_codings: Optional[List[Dict[str, Any]]]
    description: Optional[str]
    images: Optional[List[Dict[str, Any]]]
    recorded_at: Optional[str]
    identifiers: Optional[List[Dict[str, Any]]]


class BridgeHeartbeat(TypedDict):
    agent_id: str
    facility_id: str
    version: str


class BridgeHeartbeatAck(TypedDict):
    status: Literal['ok']
    agent_id: str
    facility_id: str
    version: str
    server_time: str
    server_timestamp: int
    config: Dict[str, Any]


class _BridgeSyncBatchRequired(TypedDict):
    batch_id: str
    resources: List[Any]


class BridgeSyncBatch(_BridgeSyncBatchRequired, total=False):
    groups: List[List[int]]


class BridgeSyncResult(TypedDict):
    batch_id: str
    agent_id: str
    facility_id: str
    counts: Dict[str, Any]
    results: List[Dict[str, Any]]


class CarePlan(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    status: Optional[Literal['draft', 'active', 'on-hold', 'revoked', 'completed', 'entered-in-error', 'unknown']]
    intent: Optional[Literal['proposal', 'plan', 'order', 'option']]
    title: Optional[str]
    description: Optional[str]
    category: Optional[str]
    category_code: Optional[str]
    category_system: Optional[str]
    categories: Optional[List[Dict[str, Any]]]
    period_start: Optional[str]
    period_end: Optional[str]
    created_at: Optional[str]
    author: Optional[str]
    author_reference: Optional[str]
    addresses_references: Optional[List[str]]
    addresses: Optional[str]
    goal_references: Optional[List[str]]
    care_team_references: Optional[List[str]]
    activity_locations: Optional[List[str]]
    activities: Optional[List[str]]
    activity_codings: Optional[List[Dict[str, Any]]]
    activity_references: Optional[List[str]]
    activity_requests: Optional[str]
    activity_request_codings: Optional[List[Dict[str, Any]]]
    activity_kinds: Optional[List[str]]
    activity_product_codings: Optional[List[Dict[str, Any]]]
    activity_progress: Optional[List[str]]
    activity_outcome_references: Optional[List[str]]
    note: Optional[str]


class CareTeam(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    status: Optional[Literal['proposed', 'active', 'suspended', 'inactive', 'entered-in-error']]
    name: Optional[str]
    category: Optional[str]
    category_code: Optional[str]
    category_system: Optional[str]
    categories: Optional[List[Dict[str, Any]]]
    period_start: Optional[str]
    period_end: Optional[str]
    participants: Optional[List[Dict[str, Any]]]
    reason: Optional[str]
    reason_code: Optional[str]
    reason_code_system: Optional[str]
    reason_codings: Optional[List[Dict[str, Any]]]
    reason_references: Optional[List[str]]
    managing_organization: Optional[str]
    managing_organization_references: Optional[List[str]]
    note: Optional[str]
    identifiers: Optional[List[Dict[str, Any]]]


class CdssAlert(TypedDict):
    codings: Optional[List[Dict[str, Any]]]
    implicated_references: Optional[List[str]]
    mitigations: Optional[List[Dict[str, Any]]]
    id: 'FhirId'
    patient_id: Optional['FhirId']
    encounter_id: Optional['FhirId']
    alert_type: Optional[str]
    status: Optional[Literal['preliminary', 'final', 'entered-in-error', 'mitigated']]
    severity: Optional[Literal['high', 'moderate', 'low']]
    cdss_rule_id: Optional[str]
    detail: Optional[str]
    identified_at: Optional[str]


class ClientSecretRotation(TypedDict):
    client_id: str
    client_secret: str
    previous_secret_expires_at: Optional[str]


class ClinicalImpression(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    status: Optional[Literal['in-progress', 'completed', 'entered-in-error']]
    status_reason: Optional[str]
    code: Optional[str]
    code_system: Optional[str]
    assessment: Optional[str]
    description: Optional[str]
    effective_at: Optional[str]
    effective_end: Optional[str]
    date: Optional[str]
    assessor: Optional[str]
    assessor_reference: Optional[str]
    previous_id: Optional['FhirId']
    problem_references: Optional[List[str]]
    problems: Optional[str]
    investigations: Optional[List[Dict[str, Any]]]
    summary: Optional[str]
    findings: Optional[List[Dict[str, Any]]]
    prognosis_code: Optional[str]
    prognosis_system: Optional[str]
    prognosis: Optional[str]
    prognosis_references: Optional[List[str]]
    supporting_info_references: Optional[List[str]]
    protocols: Optional[List[str]]
    note: Optional[str]
    identifiers: Optional[List[Dict[str, Any]]]


class ClinicalNote(TypedDict):
    note_type_codings: Optional[List[Dict[str, Any]]]
    categories: Optional[List[Dict[str, Any]]]
    authors: Optional[str]
    attested_by: Optional[str]
    custodian: Optional[str]
    section_entries: Optional[List[Dict[str, Any]]]
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    provider_id: Optional['FhirId']
    status: Optional[Literal['draft', 'signed', 'amended', 'entered_in_error']]
    note_type: Optional[str]
    title: Optional[str]
    history_of_present_illness: Optional[str]
    examination_findings: Optional[str]
    treatment_plan: Optional[str]
    sections: Optional[str]
    signed_at: Optional[str]
    amends_note_id: Optional['FhirId']
    created_at: Optional[str]


class ClinicalObservation(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    category: Optional[str]
    name: Optional[str]
    loinc_code: Optional[str]
    snomed_code: Optional[str]
    value_boolean: Optional[bool]
    value_time: Optional[str]
    value_date_time: Optional[str]
    value_period: Optional[Dict[str, Any]]
    value: Optional[str]
    value_numeric: Optional[float]
    comparator: Optional[Literal['<', '<=', '>=', '>']]
    unit: Optional[str]
    unit_code: Optional[str]
    value_coded: Optional[str]
    value_code: Optional[str]
    value_code_system: Optional[str]
    reference_low: Optional[float]
    reference_high: Optional[float]
    reference_range_unit: Optional[str]
    reference_range_text: Optional[str]
    flag: Optional[Literal['N', 'A', 'AA', 'H', 'HH', 'HU', 'H>', 'L', 'LL', 'LU', 'L<', '<', '>', 'POS', 'NEG', 'IND', 'DET', 'ND', 'E', 'EXP', 'UNE', 'NR', 'RR', 'WR', 'S', 'R', 'I', 'MS', 'VS', 'SDD', 'NCL', 'NS', 'SYN-R', 'SYN-S', 'B', 'D', 'U', 'W', 'AC', 'IE', 'QCF', 'TOX', 'CAR', 'Carrier', 'EX', 'HX', 'LX']]
    components: Optional[str]
    data_absent_reason: Optional[str]
    data_absent_code: Optional[str]
    interpretation: Optional[str]
    body_site: Optional[str]
    body_site_codings: Optional[List[Dict[str, Any]]]
    method: Optional[str]
    notes: Optional[List[Dict[str, Any]]]
    note: Optional[str]
    member_ids: Optional[List['FhirId']]
    derived_from_ids: Optional[List['FhirId']]
    derived_from_references: Optional[List[str]]
    status: Optional[Literal['registered', 'preliminary', 'final', 'amended', 'corrected', 'cancelled', 'entered-in-error', 'unknown']]
    effective_events: Optional[List[str]]
    effective_timing_code: Optional[str]
    effective_timing_system: Optional[str]
    effective_at: Optional[str]
    effective_end: Optional[str]
    issued_at: Optional[str]
    performer: Optional[str]
    performed_by_patient: Optional[bool]
    device: Optional[str]
    device_reference: Optional[str]
    device_type: Optional[str]
    device_type_codings: Optional[List[Dict[str, Any]]]
    based_on: Optional[str]
    based_on_code: Optional[str]
    based_on_system: Optional[str]
    specimen: Optional[str]
    specimen_note: Optional[str]
    focus: Optional[str]
    focus_references: Optional[List[str]]
    codings: Optional[List[Dict[str, Any]]]
    categories: Optional[List[Dict[str, Any]]]
    component_list: Optional[List[Dict[str, Any]]]
    interpretations: Optional[List[Dict[str, Any]]]
    reference_ranges: Optional[List[Dict[str, Any]]]
    value_codings: Optional[List[Dict[str, Any]]]


class Communication(TypedDict):
    medium_codings: Optional[List[Dict[str, Any]]]
    id: 'FhirId'
    patient_id: Optional['FhirId']
    status: Optional[Literal['preparation', 'in-progress', 'not-done', 'on-hold', 'stopped', 'completed', 'entered-in-error', 'unknown']]
    status_reason: Optional[str]
    category: Optional[str]
    category_code: Optional[str]
    category_system: Optional[str]
    priority: Optional[Literal['routine', 'urgent', 'asap', 'stat']]
    medium: Optional[str]
    topic: Optional[str]
    visit_id: Optional['FhirId']
    sent: Optional[str]
    received: Optional[str]
    sender: Optional[str]
    sender_reference: Optional[str]
    recipient_references: Optional[List[str]]
    recipients: Optional[str]
    reason_references: Optional[List[str]]
    reason: Optional[str]
    reason_code: Optional[str]
    reason_system: Optional[str]
    based_on_references: Optional[List[str]]
    part_of_references: Optional[List[str]]
    about_references: Optional[List[str]]
    in_response_to_ids: Optional[List['FhirId']]
    texts: Optional[List[str]]
    attachments: Optional[List[Dict[str, Any]]]
    resources: Optional[List[Dict[str, Any]]]
    note: Optional[str]
    identifiers: Optional[List[Dict[str, Any]]]


class CommunicationRequest(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    status: Optional[Literal['draft', 'active', 'on-hold', 'revoked', 'completed', 'entered-in-error', 'unknown']]
    status_reason: Optional[str]
    category: Optional[str]
    category_code: Optional[str]
    category_system: Optional[str]
    priority: Optional[Literal['routine', 'urgent', 'asap', 'stat']]
    do_not_perform: Optional[bool]
    medium: Optional[str]
    visit_id: Optional['FhirId']
    occurrence_at: Optional[str]
    occurrence_end: Optional[str]
    authored_on: Optional[str]
    requester: Optional[str]
    requester_reference: Optional[str]
    sender: Optional[str]
    sender_reference: Optional[str]
    recipient_references: Optional[List[str]]
    recipients: Optional[str]
    reason_references: Optional[List[str]]
    reason: Optional[str]
    reason_code: Optional[str]
    reason_system: Optional[str]
    based_on_references: Optional[List[str]]
    replaces_references: Optional[List[str]]
    about_references: Optional[List[str]]
    texts: Optional[List[str]]
    attachments: Optional[List[Dict[str, Any]]]
    resources: Optional[List[Dict[str, Any]]]
    note: Optional[str]
    identifiers: Optional[List[Dict[str, Any]]]
    group_identifier: Optional[str]


class ConsentApproval(TypedDict, total=False):
    hi_types: List['HiType']
    date_range: 'ConsentDateRange'
    expires_at: str


class ConsentArtefact(TypedDict):
    artefact: str


ConsentDataClass = Literal['patients:read', 'labs:read', 'prescriptions:read', 'documents:read', 'appointments:read', 'fhir:read']

ConsentDateRange = TypedDict('ConsentDateRange', {'from': str, 'to': str}, total=False)

class ConsentFrequency(TypedDict):
    """How often the data may be fetched: at most `count` requests per `unit` (calendar window, UTC)"""
    count: int
    unit: Literal['hour', 'day', 'week', 'month', 'year']


class _ConsentGrantRequestRequired(TypedDict):
    consent_type: 'ConsentType'
    expires_at: str


class ConsentGrantRequest(_ConsentGrantRequestRequired, total=False):
    purpose: str
    scopes: List['ConsentDataClass']
    external_reference: str
    purpose_of_use: 'PurposeOfUse'
    hi_types: List['HiType']
    date_range: 'ConsentDateRange'
    erase_at: str
    frequency: 'ConsentFrequency'


class _ConsentRequestCreateRequired(TypedDict):
    health_id: str
    purpose: str
    requested_scopes: List['ConsentDataClass']


class ConsentRequestCreate(_ConsentRequestCreateRequired, total=False):
    consent_type: 'ConsentType'
    expires_at: str
    purpose_of_use: 'PurposeOfUse'
    hi_types: List['HiType']
    date_range: 'ConsentDateRange'
    erase_at: str
    frequency: 'ConsentFrequency'


class ConsentRequestCreated(TypedDict):
    consent_request_id: str
    health_id: str
    organization_id: str
    status: Literal['pending']
    consent_type: str
    requested_scopes: List[str]
    purpose: str
    created_at: str
    purpose_of_use: 'PurposeOfUse'
    hi_types: List['HiType']
    date_range: Optional['ConsentDateRange']
    erase_at: Optional[str]
    frequency: Optional['ConsentFrequency']


class ConsentStatus(TypedDict):
    consent_id: Optional['FhirId']
    health_id: str
    organization_id: str
    consent_type: Optional[Literal['full_record', 'summary', 'diagnostics', 'prescriptions', 'documents']]
    scopes: List[str]
    status: Literal['pending', 'active', 'revoked', 'denied', 'expired', 'none']
    purpose: Optional[str]
    granted_at: Optional[str]
    expires_at: Optional[str]
    purpose_of_use: Optional[Literal['CAREMGT', 'BTG', 'PUBHLTH', 'HPAYMT', 'DSRCH', 'PATRQT']]
    hi_types: Optional[List[Literal['Prescription', 'DiagnosticReport', 'OPConsultation', 'DischargeSummary', 'ImmunizationRecord', 'HealthDocumentRecord', 'WellnessRecord']]]
    date_range: Optional[Dict[str, Any]]
    erase_at: Optional[str]
    frequency: Optional[Dict[str, Any]]


ConsentType = Literal['full_record', 'summary', 'diagnostics', 'prescriptions', 'documents']

class DeviceRequest(TypedDict):
    device_type: Optional[str]
    device_udi: Optional[str]
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    status: Optional[Literal['draft', 'active', 'on-hold', 'revoked', 'completed', 'entered-in-error', 'unknown']]
    intent: Optional[Literal['proposal', 'plan', 'directive', 'order', 'original-order', 'reflex-order', 'filler-order', 'instance-order', 'option']]
    priority: Optional[Literal['routine', 'urgent', 'asap', 'stat']]
    device: Optional[str]
    device_code: Optional[str]
    device_system: Optional[str]
    device_reference: Optional[str]
    parameters: Optional[List[Dict[str, Any]]]
    occurrence_at: Optional[str]
    occurrence_end: Optional[str]
    occurrence_timing: Optional[str]
    authored_on: Optional[str]
    requester: Optional[str]
    requester_reference: Optional[str]
    performer_type: Optional[str]
    performer: Optional[str]
    performer_reference: Optional[str]
    reason_references: Optional[List[str]]
    reason: Optional[str]
    reason_code: Optional[str]
    reason_system: Optional[str]
    based_on_references: Optional[List[str]]
    note: Optional[str]
    identifiers: Optional[List[Dict[str, Any]]]


class Diagnosis(TypedDict):
    asserted_by: Optional[str]
    asserter_reference: Optional[str]
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    provider_id: Optional['FhirId']
    recorded_by: Optional[str]
    display_name: Optional[str]
    code_system: Optional[Literal['ICD-10', 'SNOMED', 'other']]
    code: Optional[str]
    code_system_uri: Optional[str]
    snomed_code: Optional[str]
    snomed_display: Optional[str]
    status: Optional[Literal['active', 'recurrence', 'relapse', 'inactive', 'remission', 'resolved', 'provisional', 'differential', 'unconfirmed', 'confirmed', 'ruled_out', 'entered_in_error']]
    is_primary: Optional[bool]
    onset_at: Optional[str]
    onset_text: Optional[str]
    clinical_status: Optional[str]
    verification_status: Optional[str]
    abated_at: Optional[str]
    abatement_text: Optional[str]
    severity: Optional[str]
    severity_code: Optional[str]
    severity_system: Optional[str]
    body_site: Optional[str]
    body_site_codings: Optional[List[Dict[str, Any]]]
    stage: Optional[str]
    stage_codings: Optional[List[Dict[str, Any]]]
    stages: Optional[List[Dict[str, Any]]]
    category: Optional[str]
    notes: Optional[List[Dict[str, Any]]]
    note: Optional[str]
    evidence: Optional[str]
    evidence_ids: Optional[List['FhirId']]
    evidence_references: Optional[List[str]]
    created_at: Optional[str]
    codings: Optional[List[Dict[str, Any]]]
    categories: Optional[List[Dict[str, Any]]]


class DiagnosticReportRecord(TypedDict):
    forms: Optional[List[Dict[str, Any]]]
    imaging_study_references: Optional[List[str]]
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    category: Optional[str]
    categories: Optional[List[Dict[str, Any]]]
    name: Optional[str]
    loinc_code: Optional[str]
    codings: Optional[List[Dict[str, Any]]]
    status: Optional[Literal['registered', 'partial', 'preliminary', 'final', 'amended', 'corrected', 'appended', 'cancelled', 'entered-in-error', 'unknown']]
    conclusion: Optional[str]
    conclusion_code: Optional[str]
    conclusion_codings: Optional[List[Dict[str, Any]]]
    result_ids: Optional[List['FhirId']]
    media: Optional[List[Dict[str, Any]]]
    performer: Optional[str]
    results_interpreter: Optional[str]
    specimen: Optional[str]
    specimen_note: Optional[str]
    based_on: Optional[str]
    based_on_code: Optional[str]
    based_on_system: Optional[str]
    based_on_codings: Optional[List[Dict[str, Any]]]
    form_content_type: Optional[str]
    form_url: Optional[str]
    form_title: Optional[str]
    form_text: Optional[str]
    effective_at: Optional[str]
    issued_at: Optional[str]
    identifiers: Optional[List[Dict[str, Any]]]


class Dispense(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    status: Optional[Literal['preparation', 'in-progress', 'cancelled', 'on-hold', 'completed', 'entered-in-error', 'stopped', 'declined', 'unknown']]
    status_reason: Optional[str]
    category: Optional[str]
    medication: Optional[str]
    medication_code: Optional[str]
    code_system: Optional[str]
    medication_codings: Optional[List[Dict[str, Any]]]
    medication_form: Optional[str]
    medication_form_code: Optional[str]
    medication_form_system: Optional[str]
    medication_ingredients: Optional[List[Dict[str, Any]]]
    prescription_ids: Optional[List['FhirId']]
    type: Optional[str]
    type_code: Optional[str]
    type_system: Optional[str]
    quantity: Optional[float]
    quantity_unit: Optional[str]
    days_supply: Optional[float]
    days_supply_unit: Optional[str]
    prepared_at: Optional[str]
    handed_over_at: Optional[str]
    performer_references: Optional[List[str]]
    performer: Optional[str]
    location: Optional[str]
    dosage_text: Optional[str]
    timing_code: Optional[str]
    timing_system: Optional[str]
    was_substituted: Optional[bool]
    substitution_type: Optional[str]
    substitution_type_code: Optional[str]
    substitution_type_system: Optional[str]
    substitution_reason: Optional[str]
    substitution_reason_code: Optional[str]
    substitution_reason_system: Optional[str]
    substitution: Optional[str]
    note: Optional[str]
    identifiers: Optional[List[Dict[str, Any]]]


EncounterPush = TypedDict('EncounterPush', {'health_id': str, 'record': Dict[str, Any], 'encounter_type': str, 'clinical_note': str, 'status': Literal['planned', 'arrived', 'triaged', 'in-progress', 'onleave', 'finished', 'cancelled'], 'class': Literal['AMB', 'EMER', 'IMP', 'VR', 'HH'], 'reason': str, 'started_at': str, 'ended_at': str, 'alert_type': str, 'severity': Literal['high', 'moderate', 'low'], 'cdss_rule_id': str}, total=False)

class _EncounterPushedRequired(TypedDict):
    health_id: str
    encounter_id: str
    detected_issue_id: Optional[str]
    organization_id: Optional[str]
    created_at: str


class EncounterPushed(_EncounterPushedRequired, total=False):
    not_written: List[str]


class EpisodeOfCare(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    status: Optional[Literal['planned', 'waitlist', 'active', 'onhold', 'finished', 'cancelled', 'entered-in-error']]
    status_history: Optional[List[Dict[str, Any]]]
    type: Optional[str]
    type_code: Optional[str]
    type_system: Optional[str]
    diagnoses: Optional[List[Dict[str, Any]]]
    start: Optional[str]
    end: Optional[str]
    managing_organization: Optional[str]
    managing_organization_reference: Optional[str]
    care_manager: Optional[str]
    care_manager_reference: Optional[str]
    team_references: Optional[List[str]]
    referral_request_references: Optional[List[str]]
    account_references: Optional[List[str]]
    identifiers: Optional[List[Dict[str, Any]]]


class Error(TypedDict):
    """Error shape of every non-FHIR route (section 2.9)."""
    status: Literal['error']
    error_code: str
    message: str


class FamilyHistory(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    status: Optional[Literal['partial', 'completed', 'entered-in-error', 'health-unknown']]
    data_absent_reason: Optional[str]
    recorded_at: Optional[str]
    relationship: Optional[str]
    relationship_code: Optional[str]
    relationship_system: Optional[str]
    name: Optional[str]
    sex: Optional[str]
    born: Optional[str]
    age: Optional[str]
    estimated_age: Optional[bool]
    deceased: Optional[bool]
    deceased_text: Optional[str]
    reason: Optional[str]
    reason_references: Optional[List[str]]
    conditions: Optional[List[str]]
    condition_list: Optional[List[Dict[str, Any]]]
    note: Optional[str]


FhirId = str

class Flag(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    status: Optional[Literal['active', 'inactive', 'entered-in-error']]
    text: Optional[str]
    codings: Optional[List[Dict[str, Any]]]
    category: Optional[str]
    category_code: Optional[str]
    category_system: Optional[str]
    start: Optional[str]
    end: Optional[str]
    visit_id: Optional['FhirId']
    author: Optional[str]
    author_reference: Optional[str]
    identifiers: Optional[List[Dict[str, Any]]]


class Goal(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    lifecycle_status: Optional[Literal['proposed', 'planned', 'accepted', 'active', 'on-hold', 'completed', 'cancelled', 'entered-in-error', 'rejected']]
    achievement_status: Optional[str]
    achievement_code: Optional[str]
    achievement_system: Optional[str]
    category: Optional[str]
    categories: Optional[List[Dict[str, Any]]]
    priority: Optional[str]
    priority_code: Optional[Literal['high-priority', 'medium-priority', 'low-priority']]
    description: Optional[str]
    description_code: Optional[str]
    description_code_system: Optional[str]
    start_date: Optional[str]
    target_measure: Optional[str]
    target_measure_code: Optional[str]
    target_measure_system: Optional[str]
    target_value: Optional[float]
    target_comparator: Optional[Literal['<', '<=', '>=', '>']]
    target_unit: Optional[str]
    target_text: Optional[str]
    target_due_date: Optional[str]
    target_due_in: Optional[str]
    targets: Optional[List[Dict[str, Any]]]
    status_date: Optional[str]
    status_reason: Optional[str]
    expressed_by: Optional[str]
    expressed_by_reference: Optional[str]
    addresses_references: Optional[List[str]]
    addresses: Optional[str]
    outcome: Optional[str]
    note: Optional[str]


class HealthIdResolveRequest(TypedDict, total=False):
    health_id: Optional[str]
    first_name: Optional[str]
    last_name: Optional[str]
    date_of_birth: Optional[str]
    country_code: Optional[str]
    sex: Optional[Literal['male', 'female', 'other']]
    phone_number: Optional[str]
    purpose: Optional[str]
    external_reference: Optional[str]


class _HealthIdResolveResponseRequired(TypedDict):
    status: Literal['found', 'created', 'not_found']
    health_id: str


class HealthIdResolveResponse(_HealthIdResolveResponseRequired, total=False):
    patient: 'PatientDemographics'


class HealthIdVerifyResponse(TypedDict):
    valid: Literal[True]
    health_id: str
    patient: 'PatientDemographics'


HiType = Literal['Prescription', 'DiagnosticReport', 'OPConsultation', 'DischargeSummary', 'ImmunizationRecord', 'HealthDocumentRecord', 'WellnessRecord']

class ImagingStudy(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    status: Optional[Literal['registered', 'available', 'cancelled', 'entered-in-error', 'unknown']]
    started_at: Optional[str]
    description: Optional[str]
    procedure: Optional[str]
    procedure_code: Optional[str]
    procedure_code_system: Optional[str]
    procedure_codings: Optional[List[Dict[str, Any]]]
    modalities: Optional[List[str]]
    study_uid: Optional[str]
    accession_number: Optional[str]
    number_of_series: Optional[int]
    number_of_instances: Optional[int]
    reason: Optional[str]
    reason_code: Optional[str]
    reason_code_system: Optional[str]
    reason_codings: Optional[List[Dict[str, Any]]]
    reason_references: Optional[List[str]]
    referrer: Optional[str]
    referrer_reference: Optional[str]
    interpreter: Optional[str]
    location: Optional[str]
    based_on_references: Optional[List[str]]
    procedure_reference: Optional[str]
    series: Optional[List[Dict[str, Any]]]
    note: Optional[str]
    identifiers: Optional[List[Dict[str, Any]]]


class Immunization(TypedDict):
    funding_source: Optional[str]
    funding_source_code: Optional[str]
    funding_source_system: Optional[str]
    program_eligibility: Optional[str]
    program_eligibility_codings: Optional[List[Dict[str, Any]]]
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    vaccine: Optional[str]
    cvx_code: Optional[str]
    vaccine_code: Optional[str]
    vaccine_code_system: Optional[str]
    status: Optional[Literal['completed', 'entered-in-error', 'not-done']]
    status_reason: Optional[str]
    status_reason_code: Optional[str]
    status_reason_system: Optional[str]
    occurred_at: Optional[str]
    occurrence_text: Optional[str]
    primary_source: Optional[bool]
    report_origin: Optional[str]
    report_origin_code: Optional[str]
    report_origin_system: Optional[str]
    performer: Optional[str]
    performers: Optional[List[Dict[str, Any]]]
    location: Optional[str]
    lot_number: Optional[str]
    dose_number: Optional[int]
    dose_number_text: Optional[str]
    series: Optional[str]
    series_doses: Optional[int]
    target_disease: Optional[str]
    target_disease_codings: Optional[List[Dict[str, Any]]]
    reaction: Optional[str]
    reaction_references: Optional[List[str]]
    reaction_date: Optional[str]
    target_disease_code: Optional[str]
    target_disease_system: Optional[str]
    dose_quantity: Optional[float]
    dose_unit: Optional[str]
    dose_unit_code: Optional[str]
    expiration_date: Optional[str]
    manufacturer: Optional[str]
    reason_references: Optional[List[str]]
    reason: Optional[str]
    reason_codings: Optional[List[Dict[str, Any]]]
    is_subpotent: Optional[bool]
    subpotent_reason: Optional[str]
    subpotent_reason_code: Optional[str]
    subpotent_reason_system: Optional[str]
    site: Optional[str]
    site_code: Optional[str]
    site_system: Optional[str]
    route: Optional[str]
    route_code: Optional[str]
    route_system: Optional[str]
    route_codings: Optional[List[Dict[str, Any]]]
    note: Optional[str]
    vaccine_codings: Optional[List[Dict[str, Any]]]


class ImmunizationEvaluation(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    status: Optional[Literal['completed', 'entered-in-error']]
    date: Optional[str]
    authority: Optional[str]
    authority_reference: Optional[str]
    target_disease: Optional[str]
    target_disease_code: Optional[str]
    target_disease_system: Optional[str]
    immunization_id: Optional['FhirId']
    dose_status: Optional[str]
    dose_status_code: Optional[Literal['valid', 'notvalid']]
    dose_status_reason: Optional[str]
    dose_status_reason_code: Optional[str]
    description: Optional[str]
    series: Optional[str]
    dose_number: Optional[int]
    dose_number_text: Optional[str]
    series_doses: Optional[int]
    series_doses_text: Optional[str]
    identifiers: Optional[List[Dict[str, Any]]]


class ImmunizationRecommendation(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    date: Optional[str]
    authority: Optional[str]
    authority_reference: Optional[str]
    vaccine: Optional[str]
    forecast_status: Optional[str]
    forecast_status_code: Optional[str]
    due_date: Optional[str]
    recommendations: Optional[List[Dict[str, Any]]]
    identifiers: Optional[List[Dict[str, Any]]]


class _IntrospectionRequestRequired(TypedDict):
    token: str


class IntrospectionRequest(_IntrospectionRequestRequired, total=False):
    token_type_hint: str
    client_id: str
    client_secret: str


class _IntrospectionResponseRequired(TypedDict):
    active: bool


class IntrospectionResponse(_IntrospectionResponseRequired, total=False):
    """RFC 7662. Exactly {"active": false} for any token that is not a live token of ours."""
    token_type: str
    scope: str
    client_id: str
    sub: str
    aud: str
    iss: str
    exp: int
    iat: int
    jti: str


class Jwk(TypedDict):
    kty: str
    use: str
    alg: str
    kid: str
    n: str
    e: str


class Jwks(TypedDict):
    keys: List['Jwk']


class LabResult(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    test_name: Optional[str]
    loinc_code: Optional[str]
    value_boolean: Optional[bool]
    value_time: Optional[str]
    value_date_time: Optional[str]
    value_period: Optional[Dict[str, Any]]
    value_sampled_data: Optional[Dict[str, Any]]
    value: Optional[str]
    value_integer: Optional[int]
    value_numeric: Optional[float]
    value_range: Optional[Dict[str, Any]]
    value_ratio: Optional[Dict[str, Any]]
    comparator: Optional[Literal['<', '<=', '>=', '>']]
    value_precision: Optional[int]
    unit: Optional[str]
    unit_code: Optional[str]
    value_coded: Optional[str]
    value_code: Optional[str]
    value_code_system: Optional[str]
    components: Optional[str]
    data_absent_reason: Optional[str]
    data_absent_code: Optional[str]
    reference_low: Optional[float]
    reference_high: Optional[float]
    reference_range_unit: Optional[str]
    reference_range_text: Optional[str]
    flag: Optional[Literal['N', 'A', 'AA', 'H', 'HH', 'HU', 'H>', 'L', 'LL', 'LU', 'L<', '<', '>', 'POS', 'NEG', 'IND', 'DET', 'ND', 'E', 'EXP', 'UNE', 'NR', 'RR', 'WR', 'S', 'R', 'I', 'MS', 'VS', 'SDD', 'NCL', 'NS', 'SYN-R', 'SYN-S', 'B', 'D', 'U', 'W', 'AC', 'IE', 'QCF', 'TOX', 'CAR', 'Carrier', 'EX', 'HX', 'LX']]
    flag_level: Optional[Literal['normal', 'abnormal', 'low', 'high', 'critical', 'critical_low', 'critical_high']]
    interpretation: Optional[str]
    status: Optional[Literal['registered', 'preliminary', 'final', 'amended', 'corrected', 'cancelled', 'entered-in-error', 'unknown']]
    effective_events: Optional[List[str]]
    effective_timing_code: Optional[str]
    effective_timing_system: Optional[str]
    effective_at: Optional[str]
    effective_end: Optional[str]
    issued_at: Optional[str]
    method_codings: Optional[List[Dict[str, Any]]]
    method: Optional[str]
    body_site: Optional[str]
    body_site_codings: Optional[List[Dict[str, Any]]]
    specimen: Optional[str]
    specimen_note: Optional[str]
    performer: Optional[str]
    based_on: Optional[str]
    based_on_code: Optional[str]
    based_on_system: Optional[str]
    based_on_codings: Optional[List[Dict[str, Any]]]
    specimen_reference: Optional[str]
    based_on_references: Optional[List[str]]
    performer_references: Optional[List[str]]
    performed_by_patient: Optional[bool]
    focus: Optional[str]
    focus_references: Optional[List[str]]
    device: Optional[str]
    device_reference: Optional[str]
    device_type: Optional[str]
    device_type_codings: Optional[List[Dict[str, Any]]]
    member_ids: Optional[List['FhirId']]
    derived_from_ids: Optional[List['FhirId']]
    notes: Optional[List[Dict[str, Any]]]
    note: Optional[str]
    codings: Optional[List[Dict[str, Any]]]
    categories: Optional[List[Dict[str, Any]]]
    component_list: Optional[List[Dict[str, Any]]]
    interpretations: Optional[List[Dict[str, Any]]]
    reference_ranges: Optional[List[Dict[str, Any]]]
    value_codings: Optional[List[Dict[str, Any]]]
    identifiers: Optional[List[Dict[str, Any]]]
    source: str


class _LabResultPushRequired(TypedDict):
    health_id: str


class LabResultPush(_LabResultPushRequired, total=False):
    record: Dict[str, Any]
    test_name: str
    result_value: str
    flagged: bool
    flag_level: Literal['normal', 'abnormal', 'low', 'high', 'critical', 'critical_low', 'critical_high']
    interpretation: str
    unit: str
    loinc_code: str
    reference_low: float
    reference_high: float
    status: Literal['registered', 'preliminary', 'final', 'amended', 'corrected', 'cancelled', 'entered-in-error', 'unknown']
    effective_at: str


class _LabResultPushedRequired(TypedDict):
    health_id: str
    lab_result_id: str
    diagnostic_report_id: Optional[str]
    flagged: Optional[bool]
    flag: Optional[str]
    created_at: str


class LabResultPushed(_LabResultPushedRequired, total=False):
    not_written: List[str]


class MediaRecord(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    status: Optional[Literal['preparation', 'in-progress', 'not-done', 'on-hold', 'stopped', 'completed', 'entered-in-error', 'unknown']]
    type: Optional[str]
    type_code: Optional[str]
    type_system: Optional[str]
    modality: Optional[str]
    modality_code: Optional[str]
    modality_system: Optional[str]
    view: Optional[str]
    body_site: Optional[str]
    body_site_code: Optional[str]
    body_site_system: Optional[str]
    reason: Optional[str]
    created_at: Optional[str]
    issued_at: Optional[str]
    operator: Optional[str]
    operator_reference: Optional[str]
    device: Optional[str]
    content_type: Optional[str]
    url: Optional[str]
    size: Optional[int]
    title: Optional[str]
    inline: Optional[bool]
    height: Optional[int]
    width: Optional[int]
    frames: Optional[int]
    duration: Optional[float]
    note: Optional[str]


class MedicalDevice(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    status: Optional[Literal['active', 'completed', 'entered-in-error', 'intended', 'stopped', 'on-hold']]
    device: Optional[str]
    device_reference: Optional[str]
    device_status: Optional[Literal['active', 'inactive', 'entered-in-error', 'unknown']]
    device_type: Optional[str]
    device_type_code: Optional[str]
    device_type_system: Optional[str]
    udi_carrier: Optional[str]
    udi_device_identifier: Optional[str]
    udi_carriers: Optional[List[Dict[str, Any]]]
    distinct_identifier: Optional[str]
    serial_number: Optional[str]
    lot_number: Optional[str]
    manufacturer: Optional[str]
    model_number: Optional[str]
    versions: Optional[List[Dict[str, Any]]]
    manufacture_date: Optional[str]
    expiration_date: Optional[str]
    body_site: Optional[str]
    reason: Optional[str]
    reason_references: Optional[List[str]]
    used_from: Optional[str]
    used_until: Optional[str]
    recorded_at: Optional[str]
    note: Optional[str]
    source: str


class MedicationUse(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    status: Optional[Literal['active', 'completed', 'entered-in-error', 'intended', 'stopped', 'on-hold', 'unknown', 'not-taken']]
    status_reason: Optional[str]
    status_reason_codings: Optional[List[Dict[str, Any]]]
    category: Optional[str]
    medication: Optional[str]
    medication_code: Optional[str]
    code_system: Optional[str]
    medication_codings: Optional[List[Dict[str, Any]]]
    medication_form: Optional[str]
    medication_form_code: Optional[str]
    medication_form_system: Optional[str]
    medication_ingredients: Optional[List[Dict[str, Any]]]
    effective_at: Optional[str]
    effective_end: Optional[str]
    asserted_at: Optional[str]
    information_source: Optional[str]
    information_source_reference: Optional[str]
    based_on_references: Optional[List[str]]
    reason_references: Optional[List[str]]
    reason: Optional[str]
    reason_codings: Optional[List[Dict[str, Any]]]
    dosage_text: Optional[str]
    dose: Optional[float]
    dose_unit: Optional[str]
    dose_range: Optional[str]
    frequency: Optional[int]
    period: Optional[float]
    period_unit: Optional[Literal['s', 'min', 'h', 'd', 'wk', 'mo', 'a']]
    period_max: Optional[float]
    timing: Optional[str]
    as_needed_reason: Optional[str]
    as_needed: Optional[bool]
    route: Optional[str]
    route_code: Optional[str]
    route_system: Optional[str]
    note: Optional[str]


class MobileTokenRequest(TypedDict):
    health_id: str
    code: str


class MobileTokenResponse(TypedDict):
    access_token: str
    token_type: Literal['Bearer']
    expires_in: int


class MyConsents(TypedDict):
    items: List['ConsentStatus']


class NutritionOrder(TypedDict):
    food_preference_codings: Optional[List[Dict[str, Any]]]
    oral_diet_type_codings: Optional[List[Dict[str, Any]]]
    nutrient_codings: Optional[List[Dict[str, Any]]]
    texture_codings: Optional[List[Dict[str, Any]]]
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    status: Optional[Literal['draft', 'active', 'on-hold', 'revoked', 'completed', 'entered-in-error', 'unknown']]
    intent: Optional[Literal['proposal', 'plan', 'directive', 'order', 'original-order', 'reflex-order', 'filler-order', 'instance-order', 'option']]
    ordered_at: Optional[str]
    orderer: Optional[str]
    orderer_reference: Optional[str]
    allergy_intolerance_references: Optional[List[str]]
    allergy_intolerances: Optional[str]
    food_preference_modifiers: Optional[List[str]]
    exclude_foods: Optional[List[str]]
    oral_diet: Optional[Dict[str, Any]]
    supplements: Optional[List[Dict[str, Any]]]
    enteral_formula: Optional[Dict[str, Any]]
    note: Optional[str]
    identifiers: Optional[List[Dict[str, Any]]]


class OAuthError(TypedDict):
    """The Error shape, with the RFC 6749 fields OAuth libraries read."""
    status: Literal['error']
    error_code: str
    message: str
    error: Literal['invalid_request', 'invalid_client', 'unsupported_grant_type', 'invalid_scope']
    error_description: str


class OAuthServerMetadata(TypedDict):
    """RFC 8414"""
    issuer: str
    token_endpoint: str
    introspection_endpoint: str
    jwks_uri: str
    grant_types_supported: List[str]
    scopes_supported: List[str]


class OperationOutcome(TypedDict):
    resourceType: Literal['OperationOutcome']
    issue: List[Dict[str, Any]]


class Order(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    status: Optional[Literal['draft', 'active', 'on-hold', 'revoked', 'completed', 'entered-in-error', 'unknown']]
    intent: Optional[Literal['proposal', 'plan', 'directive', 'order', 'original-order', 'reflex-order', 'filler-order', 'instance-order', 'option']]
    priority: Optional[Literal['routine', 'urgent', 'asap', 'stat']]
    do_not_perform: Optional[bool]
    category: Optional[str]
    category_code: Optional[str]
    category_system: Optional[str]
    categories: Optional[List[Dict[str, Any]]]
    name: Optional[str]
    code: Optional[str]
    code_system: Optional[str]
    codings: Optional[List[Dict[str, Any]]]
    order_detail: Optional[str]
    occurrence_at: Optional[str]
    occurrence_end: Optional[str]
    occurrence_timing: Optional[str]
    occurrence_duration: Optional[str]
    occurrence_count: Optional[int]
    as_needed_reason: Optional[str]
    as_needed: Optional[bool]
    quantity: Optional[str]
    requested_at: Optional[str]
    requester: Optional[str]
    requester_reference: Optional[str]
    performer_type: Optional[str]
    performer_references: Optional[List[str]]
    performer: Optional[str]
    location: Optional[str]
    reason_references: Optional[List[str]]
    reason: Optional[str]
    reason_codings: Optional[List[Dict[str, Any]]]
    specimen_references: Optional[List[str]]
    specimen_note: Optional[str]
    body_site: Optional[str]
    body_site_codings: Optional[List[Dict[str, Any]]]
    requisition: Optional[str]
    based_on_references: Optional[List[str]]
    patient_instruction: Optional[str]
    note: Optional[str]
    identifiers: Optional[List[Dict[str, Any]]]


class PairingCode(TypedDict):
    code: str
    expires_at: str


class PatientDemographics(TypedDict):
    """Basic demographics of a registered patient (no contact details; mappings/patient-demographics.map.yaml); null where unknown."""
    health_id: str
    first_name: Optional[str]
    last_name: Optional[str]
    date_of_birth: Optional[str]
    sex: Optional[Literal['male', 'female', 'other']]
    country_code: Optional[str]


class PatientDocument(TypedDict):
    security_label_codings: Optional[List[Dict[str, Any]]]
    master_identifier: Optional[str]
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    status: Optional[Literal['current', 'superseded', 'entered-in-error']]
    doc_status: Optional[Literal['preliminary', 'final', 'amended', 'entered-in-error']]
    type: Optional[str]
    loinc_code: Optional[str]
    type_codings: Optional[List[Dict[str, Any]]]
    category: Optional[str]
    categories: Optional[List[Dict[str, Any]]]
    description: Optional[str]
    title: Optional[str]
    content_type: Optional[str]
    language: Optional[str]
    url: Optional[str]
    size: Optional[int]
    inline: Optional[bool]
    contents: Optional[List[Dict[str, Any]]]
    author: Optional[str]
    author_type: Optional[str]
    author_type_codings: Optional[List[Dict[str, Any]]]
    authenticator: Optional[str]
    authenticator_reference: Optional[str]
    custodian: Optional[str]
    custodian_reference: Optional[str]
    event: Optional[str]
    event_codings: Optional[List[Dict[str, Any]]]
    practice_setting: Optional[str]
    facility_type: Optional[str]
    facility_type_code: Optional[str]
    facility_type_system: Optional[str]
    period_start: Optional[str]
    period_end: Optional[str]
    replaces_document_id: Optional['FhirId']
    related_references: Optional[List[str]]
    relates_to: Optional[List[Dict[str, Any]]]
    security_label: Optional[str]
    created_at: Optional[str]


class PatientProfile(TypedDict):
    """The patient in the Connect shape of mappings/patient-profile.map.yaml."""
    health_id: str


class _PatientRecordsRequired(TypedDict):
    health_id: str
    type: str
    records: Dict[str, Any]


class PatientRecords(_PatientRecordsRequired, total=False):
    next_cursor: Optional[str]
    truncated: List[str]
    withheld: List[str]


class PatientSummary(TypedDict):
    health_id: str
    patient: Dict[str, Any]
    active_medications: List['Prescription']
    active_allergies: List['AllergyRecord']
    recent_labs: List['LabResult']
    recent_visits: List['Visit']
    active_care_plans: List['CarePlan']
    active_goals: List['Goal']
    recent_procedures: List['Procedure']
    active_devices: List['MedicalDevice']
    withheld: List[str]


class PaymentReconciliationDay(TypedDict):
    date: str
    time_zone: str
    facility_id: Optional[str]
    payments: List[Dict[str, Any]]
    totals: Dict[str, Any]
    unreconciled: int


class PharmacyStock(TypedDict):
    items: List['PharmacyStockLine']
    next_offset: Optional[int]


class PharmacyStockApplied(TypedDict):
    facility_id: str
    lines: int
    created: int
    changed: int
    unchanged: int


class PharmacyStockLine(TypedDict):
    medication: Dict[str, Any]
    quantity_on_hand: float
    unit: Optional[str]
    reorder_level: Optional[float]
    batches: List[Dict[str, Any]]
    facility_id: str
    updated_at: str


class PharmacyStockUpdate(TypedDict):
    facility_id: str
    items: List[Dict[str, Any]]


class PortalActivity(TypedDict):
    at: str
    who: str
    health_id: Optional[str]
    what: str
    action: Literal['create', 'read', 'update', 'delete', 'execute']
    purpose: Optional[str]
    break_glass: bool


class PortalAgent(TypedDict):
    agent_id: str
    facility_id: str
    last_seen_at: Optional[str]
    last_version: Optional[str]
    clock_skew_seconds: Optional[int]
    revoked_at: Optional[str]
    recent_batches: List[Dict[str, Any]]


class PortalClient(TypedDict):
    client_id: str
    name: str
    organization_id: str
    facility_id: Optional[str]
    scopes: List[str]
    all_patients: bool
    created_at: str
    revoked_at: Optional[str]
    previous_secret_expires_at: Optional[str]
    last_used_at: Optional[str]
    token_endpoint_auth_method: Literal['client_secret', 'private_key_jwt']
    jwks: Optional[Dict[str, Any]]
    jwks_uri: Optional[str]


class PortalSession(TypedDict):
    user: Dict[str, Any]
    csrf_token: str
    expires_at: str


class PortalSignIn(TypedDict):
    email: str
    password: str


class PortalUser(TypedDict):
    id: str
    organization_id: str
    email: str
    role: Literal['admin', 'developer', 'viewer']
    active: bool
    created_at: str


class Prescription(TypedDict):
    method_code: Optional[str]
    method_system: Optional[str]
    site_code: Optional[str]
    site_system: Optional[str]
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    prescriber_id: Optional['FhirId']
    prescriber: Optional[str]
    medication: Optional[str]
    medication_code: Optional[str]
    code_system: Optional[str]
    status_reason: Optional[str]
    status_reason_code: Optional[str]
    status_reason_system: Optional[str]
    do_not_perform: Optional[bool]
    status: Optional[Literal['active', 'on_hold', 'cancelled', 'completed', 'entered_in_error', 'stopped', 'draft', 'unknown']]
    intent: Optional[Literal['proposal', 'plan', 'order', 'original-order', 'reflex-order', 'filler-order', 'instance-order', 'option']]
    priority: Optional[Literal['routine', 'urgent', 'asap', 'stat']]
    course_of_therapy: Optional[str]
    course_of_therapy_code: Optional[str]
    course_of_therapy_system: Optional[str]
    category: Optional[str]
    categories: Optional[List[Dict[str, Any]]]
    dosage_text: Optional[str]
    dose: Optional[float]
    dose_unit: Optional[str]
    frequency: Optional[int]
    period: Optional[float]
    period_unit: Optional[Literal['s', 'min', 'h', 'd', 'wk', 'mo', 'a']]
    period_max: Optional[float]
    frequency_max: Optional[int]
    days_of_week: Optional[List[Literal['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun']]]
    times_of_day: Optional[List[str]]
    events: Optional[List[str]]
    as_needed: Optional[bool]
    as_needed_reason: Optional[str]
    route: Optional[str]
    route_code: Optional[str]
    route_system: Optional[str]
    as_needed_reason_code: Optional[str]
    as_needed_reason_system: Optional[str]
    reason_code: Optional[str]
    reason_system: Optional[str]
    method: Optional[str]
    site: Optional[str]
    dose_range: Optional[str]
    rate: Optional[str]
    max_dose: Optional[str]
    duration: Optional[str]
    additional_instructions: Optional[str]
    patient_instruction: Optional[str]
    reason: Optional[str]
    reason_references: Optional[List[str]]
    dispense_quantity: Optional[float]
    dispense_unit: Optional[str]
    refills: Optional[int]
    expected_supply_duration: Optional[str]
    substitution_allowed: Optional[bool]
    substitution: Optional[str]
    substitution_code: Optional[str]
    substitution_system: Optional[str]
    substitution_reason: Optional[str]
    substitution_reason_code: Optional[str]
    substitution_reason_system: Optional[str]
    note: Optional[str]
    authored_at: Optional[str]
    reported: Optional[bool]
    valid_from: Optional[str]
    valid_until: Optional[str]
    medication_codings: Optional[List[Dict[str, Any]]]
    medication_form: Optional[str]
    medication_form_code: Optional[str]
    medication_form_system: Optional[str]
    medication_ingredients: Optional[List[Dict[str, Any]]]
    dosage_instructions: Optional[List[Dict[str, Any]]]
    identifiers: Optional[List[Dict[str, Any]]]


class Procedure(TypedDict):
    category_codings: Optional[List[Dict[str, Any]]]
    status_reason_codings: Optional[List[Dict[str, Any]]]
    complication_codings: Optional[List[Dict[str, Any]]]
    follow_up_codings: Optional[List[Dict[str, Any]]]
    recorded_by: Optional[str]
    asserted_by: Optional[str]
    complication_details: Optional[str]
    complication_references: Optional[List[str]]
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    status: Optional[Literal['preparation', 'in-progress', 'not-done', 'on-hold', 'stopped', 'completed', 'entered-in-error', 'unknown']]
    status_reason: Optional[str]
    category: Optional[str]
    name: Optional[str]
    code: Optional[str]
    code_system: Optional[str]
    codings: Optional[List[Dict[str, Any]]]
    performed_at: Optional[str]
    performed_end: Optional[str]
    performed_text: Optional[str]
    performer_references: Optional[List[str]]
    performer: Optional[str]
    performers: Optional[List[Dict[str, Any]]]
    location: Optional[str]
    location_reference: Optional[str]
    reason_references: Optional[List[str]]
    reason: Optional[str]
    reason_codings: Optional[List[Dict[str, Any]]]
    body_site: Optional[str]
    body_site_codings: Optional[List[Dict[str, Any]]]
    outcome: Optional[str]
    outcome_code: Optional[str]
    outcome_system: Optional[str]
    complications: Optional[str]
    follow_up: Optional[str]
    used: Optional[str]
    used_code: Optional[str]
    used_code_system: Optional[str]
    used_references: Optional[List[str]]
    device_references: Optional[List[str]]
    focal_devices: Optional[List[Dict[str, Any]]]
    report_references: Optional[List[str]]
    based_on_references: Optional[List[str]]
    note: Optional[str]


PurposeOfUse = Literal['CAREMGT', 'BTG', 'PUBHLTH', 'HPAYMT', 'DSRCH', 'PATRQT']

class RevokedConsents(TypedDict):
    items: List[Dict[str, Any]]


class RiskAssessment(TypedDict):
    method_code: Optional[str]
    method_system: Optional[str]
    basis: Optional[str]
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    status: Optional[Literal['registered', 'preliminary', 'final', 'amended', 'corrected', 'cancelled', 'entered-in-error', 'unknown']]
    assessment: Optional[str]
    code: Optional[str]
    code_system: Optional[str]
    method: Optional[str]
    occurred_at: Optional[str]
    occurred_end: Optional[str]
    condition: Optional[str]
    condition_reference: Optional[str]
    performer: Optional[str]
    performer_reference: Optional[str]
    reason: Optional[str]
    reason_references: Optional[List[str]]
    basis_references: Optional[List[str]]
    predictions: Optional[List[Dict[str, Any]]]
    mitigation: Optional[str]
    note: Optional[str]


class SdkTokenIntrospection(TypedDict):
    active: bool
    scopes: List[str]
    client_id: str
    expires_at: str


class SecretRotationRequest(TypedDict, total=False):
    overlap_seconds: int


class SmartConfiguration(TypedDict):
    """SMART App Launch 2.x, .well-known/smart-configuration"""
    token_endpoint: str
    token_endpoint_auth_methods_supported: List[str]
    token_endpoint_auth_signing_alg_values_supported: List[str]
    grant_types_supported: List[str]
    scopes_supported: List[str]
    capabilities: List[str]


class Specimen(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    accession: Optional[str]
    status: Optional[Literal['available', 'unavailable', 'unsatisfactory', 'entered-in-error']]
    type: Optional[str]
    type_code: Optional[str]
    type_system: Optional[str]
    received_at: Optional[str]
    collected_at: Optional[str]
    collected_end: Optional[str]
    collector: Optional[str]
    collector_reference: Optional[str]
    collection_method: Optional[str]
    collection_method_code: Optional[str]
    collection_method_system: Optional[str]
    body_site: Optional[str]
    body_site_code: Optional[str]
    body_site_system: Optional[str]
    quantity: Optional[float]
    quantity_unit: Optional[str]
    fasting_status: Optional[str]
    condition_codings: Optional[List[Dict[str, Any]]]
    condition: Optional[str]
    processing: Optional[str]
    container: Optional[str]
    container_codings: Optional[List[Dict[str, Any]]]
    containers: Optional[List[Dict[str, Any]]]
    parent_references: Optional[List[str]]
    request_references: Optional[List[str]]
    note: Optional[str]
    identifiers: Optional[List[Dict[str, Any]]]


class Task(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    status: Optional[Literal['draft', 'requested', 'received', 'accepted', 'rejected', 'ready', 'cancelled', 'in-progress', 'on-hold', 'failed', 'completed', 'entered-in-error']]
    status_reason: Optional[str]
    business_status: Optional[str]
    business_status_code: Optional[str]
    intent: Optional[Literal['unknown', 'proposal', 'plan', 'order', 'original-order', 'reflex-order', 'filler-order', 'instance-order', 'option']]
    priority: Optional[Literal['routine', 'urgent', 'asap', 'stat']]
    name: Optional[str]
    code: Optional[str]
    code_system: Optional[str]
    description: Optional[str]
    focus_reference: Optional[str]
    focus: Optional[str]
    based_on_references: Optional[List[str]]
    part_of_references: Optional[List[str]]
    visit_id: Optional['FhirId']
    execution_start: Optional[str]
    execution_end: Optional[str]
    authored_on: Optional[str]
    last_modified: Optional[str]
    requester: Optional[str]
    requester_reference: Optional[str]
    owner: Optional[str]
    owner_reference: Optional[str]
    performer_type: Optional[str]
    reason: Optional[str]
    reason_code: Optional[str]
    reason_system: Optional[str]
    reason_reference: Optional[str]
    note: Optional[str]
    inputs: Optional[List[Dict[str, Any]]]
    outputs: Optional[List[Dict[str, Any]]]
    identifiers: Optional[List[Dict[str, Any]]]
    group_identifier: Optional[str]


class _TokenRequestRequired(TypedDict):
    grant_type: Literal['client_credentials']


class TokenRequest(_TokenRequestRequired, total=False):
    """Section 2.4. Also accepted form-encoded (SMART clients send it so), with the client credentials in HTTP Basic (RFC 6749 §2.3.1), or a client assertion (RFC 7523, SMART Backend Services)."""
    client_id: str
    client_secret: str
    client_assertion_type: Literal['urn:ietf:params:oauth:client-assertion-type:jwt-bearer']
    client_assertion: str
    scope: str


class TokenResponse(TypedDict):
    access_token: str
    token_type: Literal['Bearer']
    expires_in: int
    scope: str


class VisionPrescription(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    status: Optional[Literal['active', 'cancelled', 'draft', 'entered-in-error']]
    date_written: Optional[str]
    created: Optional[str]
    prescriber: Optional[str]
    prescriber_reference: Optional[str]
    lenses: Optional[List[Dict[str, Any]]]
    identifiers: Optional[List[Dict[str, Any]]]


Visit = TypedDict('Visit', {'diet_preference_codings': Optional[List[Dict[str, Any]]], 'special_arrangement_codings': Optional[List[Dict[str, Any]]], 'status_history': Optional[List[Dict[str, Any]]], 'class_history': Optional[List[Dict[str, Any]]], 'id': 'FhirId', 'patient_id': Optional['FhirId'], 'type': Optional[str], 'service_codings': Optional[List[Dict[str, Any]]], 'service': Optional[str], 'part_of_id': Optional['FhirId'], 'class': Optional[str], 'class_coding': Optional[Dict[str, Any]], 'status': Optional[Literal['planned', 'arrived', 'triaged', 'in-progress', 'onleave', 'finished', 'cancelled', 'entered-in-error', 'unknown']], 'reason_references': Optional[List[str]], 'reason': Optional[str], 'reason_codings': Optional[List[Dict[str, Any]]], 'reasons': Optional[List[Dict[str, Any]]], 'reasons_referenced': Optional[str], 'provider_id': Optional['FhirId'], 'facility_id': Optional['FhirId'], 'provider': Optional[str], 'participants': Optional[List[Dict[str, Any]]], 'facility': Optional[str], 'started_at': Optional[str], 'ended_at': Optional[str], 'note': Optional[str], 'priority': Optional[str], 'priority_code': Optional[str], 'priority_system': Optional[str], 'location': Optional[str], 'locations': Optional[List[Dict[str, Any]]], 'length': Optional[str], 'length_quantity': Optional[Dict[str, Any]], 'admit_source': Optional[str], 'admit_source_code': Optional[str], 'admit_source_system': Optional[str], 'discharge_disposition': Optional[str], 'discharge_disposition_code': Optional[str], 'discharge_disposition_system': Optional[str], 'origin': Optional[str], 'destination': Optional[str], 'participant_references': Optional[List[str]], 'episode_of_care_references': Optional[List[str]], 'diagnosis_ids': Optional[List['FhirId']], 'diagnoses': Optional[List[Dict[str, Any]]], 'primary_diagnosis_id': Optional['FhirId'], 'primary_diagnosis': Optional[str], 'readmission': Optional[str], 'special_arrangements': Optional[str], 'diet_preferences': Optional[str], 'types': Optional[List[Dict[str, Any]]], 'type_concepts': Optional[List[Dict[str, Any]]], 'identifiers': Optional[List[Dict[str, Any]]]}, total=False)

class Vital(TypedDict):
    id: 'FhirId'
    patient_id: Optional['FhirId']
    visit_id: Optional['FhirId']
    type: Optional[str]
    name: Optional[str]
    value: Optional[float]
    comparator: Optional[Literal['<', '<=', '>=', '>']]
    systolic: Optional[float]
    diastolic: Optional[float]
    unit: Optional[str]
    unit_code: Optional[str]
    value_text: Optional[str]
    value_coded: Optional[str]
    data_absent_reason: Optional[str]
    data_absent_code: Optional[str]
    interpretation: Optional[str]
    reference_range: Optional[str]
    components: Optional[str]
    body_site: Optional[str]
    method: Optional[str]
    body_position: Optional[str]
    body_position_codings: Optional[List[Dict[str, Any]]]
    body_site_codings: Optional[List[Dict[str, Any]]]
    method_codings: Optional[List[Dict[str, Any]]]
    status: Optional[Literal['registered', 'preliminary', 'final', 'amended', 'corrected', 'cancelled', 'entered-in-error', 'unknown']]
    effective_events: Optional[List[str]]
    effective_timing_code: Optional[str]
    effective_timing_system: Optional[str]
    recorded_at: Optional[str]
    recorded_end: Optional[str]
    performer: Optional[str]
    performed_by_patient: Optional[bool]
    focus: Optional[str]
    focus_references: Optional[List[str]]
    device: Optional[str]
    device_reference: Optional[str]
    device_type: Optional[str]
    device_type_codings: Optional[List[Dict[str, Any]]]
    notes: Optional[List[Dict[str, Any]]]
    note: Optional[str]
    member_ids: Optional[List['FhirId']]
    derived_from_ids: Optional[List['FhirId']]
    codings: Optional[List[Dict[str, Any]]]
    categories: Optional[List[Dict[str, Any]]]
    component_list: Optional[List[Dict[str, Any]]]
    interpretations: Optional[List[Dict[str, Any]]]
    reference_ranges: Optional[List[Dict[str, Any]]]
    value_codings: Optional[List[Dict[str, Any]]]


class WebhookDelivery(TypedDict):
    id: str
    event_id: str
    event_type: 'WebhookEventType'
    subscription_id: str
    callback_url: str
    status: Literal['pending', 'delivered', 'exhausted', 'cancelled']
    round: int
    attempts_made: int
    next_attempt_at: Optional[str]
    attempts: List[Dict[str, Any]]


class WebhookDeliveryPage(TypedDict):
    deliveries: List['WebhookDelivery']
    next_cursor: Optional[str]


class WebhookEventDeliveries(TypedDict):
    event_id: str
    type: 'WebhookEventType'
    created_at: str
    deliveries: List['WebhookDelivery']


WebhookEventType = Literal['patient.created', 'patient.updated', 'health_id.created', 'health_id.verified', 'consent.requested', 'consent.granted', 'consent.denied', 'consent.revoked', 'consent.expired', 'consent.erase_due', 'encounter.created', 'encounter.closed', 'lab_order.created', 'lab_result.released', 'lab_result.amended', 'prescription.issued', 'prescription.cancelled', 'prescription.dispensed', 'appointment.created', 'appointment.checked_in', 'appointment.cancelled', 'document.issued', 'document.verified', 'bridge_agent.sync_failed']

class WebhookReplay(TypedDict):
    event_id: str
    deliveries: List[Dict[str, Any]]


class WebhookSecretRotation(TypedDict):
    id: str
    callback_url: str
    subscribed_events: List['WebhookEventType']
    description: str
    status: Literal['active']
    full_payload: bool
    created_at: str
    webhook_secret: str
    previous_secret_expires_at: Optional[str]


class WebhookSubscription(TypedDict):
    id: str
    callback_url: str
    subscribed_events: List['WebhookEventType']
    description: str
    status: Literal['active']
    full_payload: bool
    created_at: str


class _WebhookSubscriptionCreateRequired(TypedDict):
    callback_url: str
    subscribed_events: List['WebhookEventType']


class WebhookSubscriptionCreate(_WebhookSubscriptionCreateRequired, total=False):
    description: str


class WebhookSubscriptionCreated(TypedDict):
    id: str
    callback_url: str
    subscribed_events: List['WebhookEventType']
    description: str
    status: Literal['active']
    full_payload: bool
    created_at: str
    webhook_secret: str
