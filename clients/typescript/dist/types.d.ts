export type AccessLog = {
    items: Array<{
        at: string;
        actor: {
            kind: "organization" | "patient" | "system";
            organization_id: string | null;
            client_id: string | null;
        };
        operation: string | null;
        action: "read" | "create" | "update" | "delete" | "execute";
        data_types: Array<string>;
        purpose: string | null;
        break_glass: boolean;
        outcome: "allowed" | "refused";
    }>;
    next_cursor: string | null;
};
export type Administration = {
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    status: "in-progress" | "not-done" | "on-hold" | "completed" | "entered-in-error" | "stopped" | "unknown" | null;
    status_reason: string | null;
    medication: string | null;
    medication_code: string | null;
    code_system: string | null;
    medication_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    medication_form: string | null;
    medication_form_code: string | null;
    medication_form_system: string | null;
    medication_ingredients: Array<{
        name: string | null;
        code: string | null;
        system: string | null;
        strength: string | null;
        active: boolean | null;
    }> | null;
    prescription_id: FhirId | null;
    administered_at: string | null;
    administered_end: string | null;
    performer: string | null;
    performer_reference: string | null;
    reason: string | null;
    reason_references: Array<string> | null;
    dosage_text: string | null;
    dose: number | null;
    dose_unit: string | null;
    route: string | null;
    site: string | null;
    rate_unit_code: string | null;
    rate: string | null;
    note: string | null;
};
export type AdverseEvent = {
    id: FhirId;
    patient_id: FhirId | null;
    actuality: "actual" | "potential" | null;
    event: string | null;
    event_code: string | null;
    event_system: string | null;
    category: string | null;
    category_code: string | null;
    category_system: string | null;
    date: string | null;
    detected: string | null;
    recorded_date: string | null;
    visit_id: FhirId | null;
    location: string | null;
    location_reference: string | null;
    seriousness: string | null;
    seriousness_code: string | null;
    severity: string | null;
    severity_code: string | null;
    outcome: string | null;
    outcome_code: string | null;
    resulting_condition_references: Array<string> | null;
    resulting_conditions: string | null;
    recorder: string | null;
    recorder_reference: string | null;
    contributor_references: Array<string> | null;
    suspects: Array<{
        name: string | null;
        reference: string | null;
        causality: string | null;
        causality_method: string | null;
        code: string | null;
        code_system: string | null;
        form: string | null;
        form_code: string | null;
        causality_code: string | null;
        causality_system: string | null;
    }> | null;
    medical_history_references: Array<string> | null;
    identifier_system: string | null;
    identifier_value: string | null;
};
export type AllergyRecord = {
    id: FhirId;
    patient_id: FhirId | null;
    provider_id: FhirId | null;
    recorded_by: string | null;
    substance: string | null;
    severity: "mild" | "moderate" | "severe" | "life_threatening" | null;
    status: "active" | "inactive" | "resolved" | "unconfirmed" | "refuted" | "entered_in_error" | null;
    criticality: string | null;
    type: "allergy" | "intolerance" | null;
    category: string | null;
    code: string | null;
    code_system: string | null;
    reactions: string | null;
    reaction_list: Array<{
        manifestations: string | null;
        severity: "mild" | "moderate" | "severe" | null;
        onset_at: string | null;
        description: string | null;
        exposure_route: string | null;
        exposure_route_code: string | null;
        exposure_route_system: string | null;
        substance: string | null;
        substance_code: string | null;
        substance_system: string | null;
        substance_codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        note: string | null;
    }> | null;
    onset_at: string | null;
    onset_text: string | null;
    last_occurrence_at: string | null;
    notes: Array<{
        text: string | null;
        author: string | null;
        author_string: string | null;
        author_reference: string | null;
        time: string | null;
    }> | null;
    note: string | null;
    created_at: string | null;
    substance_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    clinical_status: string | null;
    verification_status: string | null;
    reaction_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
};
export type Appointment = {
    id: FhirId;
    patient_id: FhirId | null;
    status: "proposed" | "pending" | "booked" | "arrived" | "fulfilled" | "cancelled" | "noshow" | "entered-in-error" | "checked-in" | "waitlist" | null;
    cancelation_reason: string | null;
    service_category: string | null;
    service_category_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    service_type: string | null;
    service_type_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    specialty: string | null;
    specialty_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    appointment_type: string | null;
    appointment_type_code: string | null;
    appointment_type_system: string | null;
    reason_references: Array<string> | null;
    reason: string | null;
    reasons: Array<{
        text: string | null;
        codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
    }> | null;
    priority: number | null;
    description: string | null;
    start: string | null;
    end: string | null;
    minutes_duration: number | null;
    created: string | null;
    comment: string | null;
    patient_instruction: string | null;
    based_on_references: Array<string> | null;
    requested_periods: Array<{
        start: string | null;
        end: string | null;
    }> | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
    participants: Array<{
        reference: string | null;
        name: string | null;
        role: string | null;
        role_code: string | null;
        role_system: string | null;
        required: "required" | "optional" | "information-only" | null;
        status: "accepted" | "declined" | "tentative" | "needs-action" | null;
    }> | null;
};
export type Assessment = {
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    questionnaire: string | null;
    status: "in-progress" | "completed" | "amended" | "entered-in-error" | "stopped" | null;
    authored_at: string | null;
    author: string | null;
    author_reference: string | null;
    source_reference: string | null;
    based_on_references: Array<string> | null;
    answers: Array<string> | null;
    score: number | null;
    score_link_id: string | null;
};
export type BloodInventory = {
    items: Array<{
        facility_id: string;
        blood_group: "A+" | "A-" | "B+" | "B-" | "AB+" | "AB-" | "O+" | "O-";
        component: "whole_blood" | "packed_red_cells" | "platelets" | "plasma" | "cryoprecipitate";
        /** Available units not yet expired */
        units_available: number;
        /** Of those, the units that expire within 7 days */
        units_expiring_within_7_days: number;
        /** When a unit of this line last changed */
        updated_at: string;
    }>;
};
export type BodyStructure = {
    id: FhirId;
    patient_id: FhirId | null;
    active: boolean | null;
    morphology: string | null;
    morphology_code: string | null;
    morphology_system: string | null;
    location: string | null;
    location_code: string | null;
    location_system: string | null;
    location_qualifiers: string | null;
    location_qualifier_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    description: string | null;
    images: Array<{
        content_type: string | null;
        url: string | null;
        title: string | null;
        size: number | null;
        inline: boolean | null;
    }> | null;
    recorded_at: string | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
};
export type BridgeHeartbeat = {
    agent_id: string;
    facility_id: string;
    /** Version of the Bridge Agent software */
    version: string;
};
export type BridgeHeartbeatAck = {
    status: "ok";
    agent_id: string;
    facility_id: string;
    version: string;
    /** ISO 8601; agents can correct their clock for X-Bridge-Timestamp */
    server_time: string;
    /** Unix seconds */
    server_timestamp: number;
    /** Settings the agent applies from now on */
    config: {
        /** How often to send what changed (PONT_BRIDGE_SYNC_INTERVAL) */
        sync_interval_seconds: number;
        /** How often to send a heartbeat */
        heartbeat_interval_seconds: number;
        /** The most resources one sync batch may hold (more: 413) */
        max_batch_resources: number;
    };
};
export type BridgeSyncBatch = {
    /** The agent's id of the batch: a resend under the same id gets the same answer */
    batch_id: string;
    /** FHIR R4 resources, each with the facility system's id; at most 1000 */
    resources: Array<unknown>;
    /** Resources written together or not at all, each group a run of consecutive indexes in `resources` (an HL7 message's resources): when one of a group is refused, the others are `failed` too. An index is in one group at most; a resource in none is written on its own. */
    groups?: Array<Array<number>>;
};
export type BridgeSyncResult = {
    batch_id: string;
    agent_id: string;
    facility_id: string;
    counts: {
        created: number;
        updated: number;
        unchanged: number;
        failed: number;
    };
    results: Array<{
        index: number;
        status: "created" | "updated" | "unchanged" | "failed";
        resource_type: string | null;
        /** Pont's id of the resource */
        id: string | null;
        /** The agent's id, as sent */
        source_id: string | null;
        error: string | null;
    }>;
};
export type CarePlan = {
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    status: "draft" | "active" | "on-hold" | "revoked" | "completed" | "entered-in-error" | "unknown" | null;
    intent: "proposal" | "plan" | "order" | "option" | null;
    title: string | null;
    description: string | null;
    category: string | null;
    category_code: string | null;
    category_system: string | null;
    categories: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    period_start: string | null;
    period_end: string | null;
    created_at: string | null;
    author: string | null;
    author_reference: string | null;
    addresses_references: Array<string> | null;
    addresses: string | null;
    goal_references: Array<string> | null;
    care_team_references: Array<string> | null;
    activity_locations: Array<string> | null;
    activities: Array<string> | null;
    activity_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    activity_references: Array<string> | null;
    activity_requests: string | null;
    activity_request_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    activity_kinds: Array<string> | null;
    activity_product_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    activity_progress: Array<string> | null;
    activity_outcome_references: Array<string> | null;
    note: string | null;
};
export type CareTeam = {
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    status: "proposed" | "active" | "suspended" | "inactive" | "entered-in-error" | null;
    name: string | null;
    category: string | null;
    category_code: string | null;
    category_system: string | null;
    categories: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    period_start: string | null;
    period_end: string | null;
    participants: Array<{
        member_reference: string | null;
        name: string | null;
        role: string | null;
        role_code: string | null;
        role_system: string | null;
        role_codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        organization: string | null;
        organization_reference: string | null;
        period_start: string | null;
        period_end: string | null;
    }> | null;
    reason: string | null;
    reason_code: string | null;
    reason_code_system: string | null;
    reason_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    reason_references: Array<string> | null;
    managing_organization: string | null;
    managing_organization_references: Array<string> | null;
    note: string | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
};
export type CdssAlert = {
    codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    implicated_references: Array<string> | null;
    mitigations: Array<{
        action: string | null;
        action_code: string | null;
        action_system: string | null;
        date: string | null;
        author: string | null;
    }> | null;
    id: FhirId;
    patient_id: FhirId | null;
    encounter_id: FhirId | null;
    alert_type: string | null;
    status: "preliminary" | "final" | "entered-in-error" | "mitigated" | null;
    severity: "high" | "moderate" | "low" | null;
    cdss_rule_id: string | null;
    detail: string | null;
    identified_at: string | null;
};
export type ClientSecretRotation = {
    client_id: string;
    /** pcs_…: the new secret, shown in this response only */
    client_secret: string;
    /** Until when the replaced secret is still accepted (ISO 8601); null: refused already */
    previous_secret_expires_at: string | null;
};
export type ClinicalImpression = {
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    status: "in-progress" | "completed" | "entered-in-error" | null;
    status_reason: string | null;
    code: string | null;
    code_system: string | null;
    assessment: string | null;
    description: string | null;
    effective_at: string | null;
    effective_end: string | null;
    date: string | null;
    assessor: string | null;
    assessor_reference: string | null;
    previous_id: FhirId | null;
    problem_references: Array<string> | null;
    problems: string | null;
    investigations: Array<{
        name: string | null;
        code: string | null;
        system: string | null;
        items: string | null;
        item_references: Array<string> | null;
    }> | null;
    summary: string | null;
    findings: Array<{
        name: string | null;
        code: string | null;
        system: string | null;
        reference: string | null;
        basis: string | null;
    }> | null;
    prognosis_code: string | null;
    prognosis_system: string | null;
    prognosis: string | null;
    prognosis_references: Array<string> | null;
    supporting_info_references: Array<string> | null;
    protocols: Array<string> | null;
    note: string | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
};
export type ClinicalNote = {
    note_type_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    categories: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
        text: string | null;
    }> | null;
    authors: string | null;
    attested_by: string | null;
    custodian: string | null;
    section_entries: Array<{
        section: string | null;
        entries: string | null;
        references: Array<string> | null;
    }> | null;
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    provider_id: FhirId | null;
    status: "draft" | "signed" | "amended" | "entered_in_error" | null;
    note_type: string | null;
    title: string | null;
    history_of_present_illness: string | null;
    examination_findings: string | null;
    treatment_plan: string | null;
    sections: string | null;
    signed_at: string | null;
    amends_note_id: FhirId | null;
    created_at: string | null;
};
export type ClinicalObservation = {
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    category: string | null;
    name: string | null;
    loinc_code: string | null;
    snomed_code: string | null;
    value_boolean: boolean | null;
    value_time: string | null;
    value_date_time: string | null;
    value_period: {
        start: string | null;
        end: string | null;
    } | null;
    value: string | null;
    value_numeric: number | null;
    comparator: "<" | "<=" | ">=" | ">" | null;
    unit: string | null;
    unit_code: string | null;
    value_coded: string | null;
    value_code: string | null;
    value_code_system: string | null;
    reference_low: number | null;
    reference_high: number | null;
    reference_range_unit: string | null;
    reference_range_text: string | null;
    flag: "N" | "A" | "AA" | "H" | "HH" | "HU" | "H>" | "L" | "LL" | "LU" | "L<" | "<" | ">" | "POS" | "NEG" | "IND" | "DET" | "ND" | "E" | "EXP" | "UNE" | "NR" | "RR" | "WR" | "S" | "R" | "I" | "MS" | "VS" | "SDD" | "NCL" | "NS" | "SYN-R" | "SYN-S" | "B" | "D" | "U" | "W" | "AC" | "IE" | "QCF" | "TOX" | "CAR" | "Carrier" | "EX" | "HX" | "LX" | null;
    components: string | null;
    data_absent_reason: string | null;
    data_absent_code: string | null;
    interpretation: string | null;
    body_site: string | null;
    body_site_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    method: string | null;
    notes: Array<{
        text: string | null;
        author: string | null;
        author_string: string | null;
        author_reference: string | null;
        time: string | null;
    }> | null;
    note: string | null;
    member_ids: Array<FhirId> | null;
    derived_from_ids: Array<FhirId> | null;
    derived_from_references: Array<string> | null;
    status: "registered" | "preliminary" | "final" | "amended" | "corrected" | "cancelled" | "entered-in-error" | "unknown" | null;
    effective_events: Array<string> | null;
    effective_timing_code: string | null;
    effective_timing_system: string | null;
    effective_at: string | null;
    effective_end: string | null;
    issued_at: string | null;
    performer: string | null;
    performed_by_patient: boolean | null;
    device: string | null;
    device_reference: string | null;
    device_type: string | null;
    device_type_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    based_on: string | null;
    based_on_code: string | null;
    based_on_system: string | null;
    specimen: string | null;
    specimen_note: string | null;
    focus: string | null;
    focus_references: Array<string> | null;
    codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    categories: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    component_list: Array<{
        name: string | null;
        code: string | null;
        system: string | null;
        display: string | null;
        codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        value_numeric: number | null;
        value_integer: number | null;
        value_boolean: boolean | null;
        value_time: string | null;
        value_date_time: string | null;
        value_period: {
            start: string | null;
            end: string | null;
        } | null;
        value_range: {
            low: number | null;
            high: number | null;
            unit: string | null;
            unit_code: string | null;
        } | null;
        value_ratio: {
            numerator: number | null;
            numerator_unit: string | null;
            numerator_unit_code: string | null;
            denominator: number | null;
            denominator_unit: string | null;
            denominator_unit_code: string | null;
        } | null;
        value_precision: number | null;
        comparator: "<" | "<=" | ">=" | ">" | null;
        unit: string | null;
        unit_code: string | null;
        value: string | null;
        value_coded: string | null;
        value_code: string | null;
        value_code_system: string | null;
        value_codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        interpretations: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        data_absent_reason: string | null;
        data_absent_code: string | null;
        reference_ranges: Array<{
            low: number | null;
            high: number | null;
            unit: string | null;
            unit_code: string | null;
            text: string | null;
            type: string | null;
            type_codings: Array<{
                system: string | null;
                code: string | null;
                display: string | null;
            }> | null;
            type_text: string | null;
            applies_to: string | null;
            applies_to_concepts: Array<{
                text: string | null;
                codings: Array<{
                    system: string | null;
                    code: string | null;
                    display: string | null;
                }> | null;
            }> | null;
            age_low: number | null;
            age_high: number | null;
            age_unit: string | null;
            age_unit_code: string | null;
        }> | null;
    }> | null;
    interpretations: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    reference_ranges: Array<{
        low: number | null;
        high: number | null;
        unit: string | null;
        unit_code: string | null;
        text: string | null;
        type: string | null;
        type_codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        type_text: string | null;
        applies_to: string | null;
        applies_to_concepts: Array<{
            text: string | null;
            codings: Array<{
                system: string | null;
                code: string | null;
                display: string | null;
            }> | null;
        }> | null;
        age_low: number | null;
        age_high: number | null;
        age_unit: string | null;
        age_unit_code: string | null;
    }> | null;
    value_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
};
export type Communication = {
    medium_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    id: FhirId;
    patient_id: FhirId | null;
    status: "preparation" | "in-progress" | "not-done" | "on-hold" | "stopped" | "completed" | "entered-in-error" | "unknown" | null;
    status_reason: string | null;
    category: string | null;
    category_code: string | null;
    category_system: string | null;
    priority: "routine" | "urgent" | "asap" | "stat" | null;
    medium: string | null;
    topic: string | null;
    visit_id: FhirId | null;
    sent: string | null;
    received: string | null;
    sender: string | null;
    sender_reference: string | null;
    recipient_references: Array<string> | null;
    recipients: string | null;
    reason_references: Array<string> | null;
    reason: string | null;
    reason_code: string | null;
    reason_system: string | null;
    based_on_references: Array<string> | null;
    part_of_references: Array<string> | null;
    about_references: Array<string> | null;
    in_response_to_ids: Array<FhirId> | null;
    texts: Array<string> | null;
    attachments: Array<{
        content_type: string | null;
        url: string | null;
        title: string | null;
        size: number | null;
        inline: boolean | null;
    }> | null;
    resources: Array<{
        reference: string | null;
        name: string | null;
    }> | null;
    note: string | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
};
export type CommunicationRequest = {
    id: FhirId;
    patient_id: FhirId | null;
    status: "draft" | "active" | "on-hold" | "revoked" | "completed" | "entered-in-error" | "unknown" | null;
    status_reason: string | null;
    category: string | null;
    category_code: string | null;
    category_system: string | null;
    priority: "routine" | "urgent" | "asap" | "stat" | null;
    do_not_perform: boolean | null;
    medium: string | null;
    visit_id: FhirId | null;
    occurrence_at: string | null;
    occurrence_end: string | null;
    authored_on: string | null;
    requester: string | null;
    requester_reference: string | null;
    sender: string | null;
    sender_reference: string | null;
    recipient_references: Array<string> | null;
    recipients: string | null;
    reason_references: Array<string> | null;
    reason: string | null;
    reason_code: string | null;
    reason_system: string | null;
    based_on_references: Array<string> | null;
    replaces_references: Array<string> | null;
    about_references: Array<string> | null;
    texts: Array<string> | null;
    attachments: Array<{
        content_type: string | null;
        url: string | null;
        title: string | null;
        size: number | null;
        inline: boolean | null;
    }> | null;
    resources: Array<{
        reference: string | null;
        name: string | null;
    }> | null;
    note: string | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
    group_identifier: string | null;
};
export type ConsentApproval = {
    /** The kinds of record it covers (narrows the classes; absent: every kind of its classes) */
    hi_types?: Array<HiType>;
    date_range?: ConsentDateRange;
    /** ISO 8601 date-time with a zone, in the future */
    expires_at?: string;
};
export type ConsentArtefact = {
    /** Compact JWS (RS256) */
    artefact: string;
};
/** A data class a consent covers (docs/integrators.md "Consent") */
export type ConsentDataClass = "patients:read" | "labs:read" | "prescriptions:read" | "documents:read" | "appointments:read" | "fhir:read";
/** The period of care the data may come from (both days included) */
export type ConsentDateRange = {
    /** YYYY-MM-DD */
    from: string;
    /** YYYY-MM-DD */
    to: string;
};
/** How often the data may be fetched: at most `count` requests per `unit` (calendar window, UTC) */
export type ConsentFrequency = {
    count: number;
    unit: "hour" | "day" | "week" | "month" | "year";
};
export type ConsentGrantRequest = {
    consent_type: ConsentType;
    /** ISO 8601 date-time with a zone, in the future */
    expires_at: string;
    purpose?: string;
    /** Narrows the consent type's classes (never widens) */
    scopes?: Array<ConsentDataClass>;
    /** The caller's own reference, written to the audit trail */
    external_reference?: string;
    /** Default CAREMGT */
    purpose_of_use?: PurposeOfUse;
    /** The kinds of record it covers (narrows the classes; absent: every kind of its classes) */
    hi_types?: Array<HiType>;
    date_range?: ConsentDateRange;
    /** When the receiver must have deleted its copies (event consent.erase_due) */
    erase_at?: string;
    frequency?: ConsentFrequency;
};
export type ConsentRequestCreate = {
    health_id: string;
    purpose: string;
    requested_scopes: Array<ConsentDataClass>;
    /** Default full_record, narrowed to requested_scopes */
    consent_type?: ConsentType;
    /** How long the consent lasts once approved (default 365 days from approval) */
    expires_at?: string;
    /** Default CAREMGT */
    purpose_of_use?: PurposeOfUse;
    /** The kinds of record it covers (narrows the classes; absent: every kind of its classes) */
    hi_types?: Array<HiType>;
    date_range?: ConsentDateRange;
    /** When the receiver must have deleted its copies (event consent.erase_due) */
    erase_at?: string;
    frequency?: ConsentFrequency;
};
export type ConsentRequestCreated = {
    consent_request_id: string;
    health_id: string;
    organization_id: string;
    status: "pending";
    consent_type: string;
    requested_scopes: Array<string>;
    purpose: string;
    created_at: string;
    purpose_of_use: PurposeOfUse;
    hi_types: Array<HiType>;
    date_range: ConsentDateRange | null;
    erase_at: string | null;
    frequency: ConsentFrequency | null;
};
export type ConsentStatus = {
    consent_id: FhirId | null;
    health_id: string;
    organization_id: string;
    consent_type: "full_record" | "summary" | "diagnostics" | "prescriptions" | "documents" | null;
    /** The data classes it covers */
    scopes: Array<string>;
    /** The consent map's status; `expired`: active, but expires_at has passed; `none`: no consent on file */
    status: "pending" | "active" | "revoked" | "denied" | "expired" | "none";
    purpose: string | null;
    granted_at: string | null;
    expires_at: string | null;
    purpose_of_use: "CAREMGT" | "BTG" | "PUBHLTH" | "HPAYMT" | "DSRCH" | "PATRQT" | null;
    hi_types: Array<"Prescription" | "DiagnosticReport" | "OPConsultation" | "DischargeSummary" | "ImmunizationRecord" | "HealthDocumentRecord" | "WellnessRecord"> | null;
    date_range: {
        from: string | null;
        to: string | null;
    } | null;
    erase_at: string | null;
    frequency: {
        count: number | null;
        unit: "hour" | "day" | "week" | "month" | "year" | null;
    } | null;
};
/** docs/integrators.md "Consent": the classes each covers */
export type ConsentType = "full_record" | "summary" | "diagnostics" | "prescriptions" | "documents";
export type DeviceRequest = {
    device_type: string | null;
    device_udi: string | null;
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    status: "draft" | "active" | "on-hold" | "revoked" | "completed" | "entered-in-error" | "unknown" | null;
    intent: "proposal" | "plan" | "directive" | "order" | "original-order" | "reflex-order" | "filler-order" | "instance-order" | "option" | null;
    priority: "routine" | "urgent" | "asap" | "stat" | null;
    device: string | null;
    device_code: string | null;
    device_system: string | null;
    device_reference: string | null;
    parameters: Array<{
        name: string | null;
        value: string | null;
        unit_code: string | null;
    }> | null;
    occurrence_at: string | null;
    occurrence_end: string | null;
    occurrence_timing: string | null;
    authored_on: string | null;
    requester: string | null;
    requester_reference: string | null;
    performer_type: string | null;
    performer: string | null;
    performer_reference: string | null;
    reason_references: Array<string> | null;
    reason: string | null;
    reason_code: string | null;
    reason_system: string | null;
    based_on_references: Array<string> | null;
    note: string | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
};
export type Diagnosis = {
    asserted_by: string | null;
    asserter_reference: string | null;
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    provider_id: FhirId | null;
    recorded_by: string | null;
    display_name: string | null;
    code_system: "ICD-10" | "SNOMED" | "other" | null;
    code: string | null;
    code_system_uri: string | null;
    snomed_code: string | null;
    snomed_display: string | null;
    status: "active" | "recurrence" | "relapse" | "inactive" | "remission" | "resolved" | "provisional" | "differential" | "unconfirmed" | "confirmed" | "ruled_out" | "entered_in_error" | null;
    is_primary: boolean | null;
    onset_at: string | null;
    onset_text: string | null;
    clinical_status: string | null;
    verification_status: string | null;
    abated_at: string | null;
    abatement_text: string | null;
    severity: string | null;
    severity_code: string | null;
    severity_system: string | null;
    body_site: string | null;
    body_site_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    stage: string | null;
    stage_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    stages: Array<{
        summary: string | null;
        type: string | null;
        type_code: string | null;
        type_system: string | null;
        assessment: string | null;
        assessment_references: Array<string> | null;
    }> | null;
    category: string | null;
    notes: Array<{
        text: string | null;
        author: string | null;
        author_string: string | null;
        author_reference: string | null;
        time: string | null;
    }> | null;
    note: string | null;
    evidence: string | null;
    evidence_ids: Array<FhirId> | null;
    evidence_references: Array<string> | null;
    created_at: string | null;
    codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    categories: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
};
export type DiagnosticReportRecord = {
    forms: Array<{
        content_type: string | null;
        title: string | null;
        url: string | null;
        language: string | null;
        created_at: string | null;
    }> | null;
    imaging_study_references: Array<string> | null;
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    category: string | null;
    categories: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    name: string | null;
    loinc_code: string | null;
    codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    status: "registered" | "partial" | "preliminary" | "final" | "amended" | "corrected" | "appended" | "cancelled" | "entered-in-error" | "unknown" | null;
    conclusion: string | null;
    conclusion_code: string | null;
    conclusion_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    result_ids: Array<FhirId> | null;
    media: Array<{
        comment: string | null;
        media_id: FhirId | null;
    }> | null;
    performer: string | null;
    results_interpreter: string | null;
    specimen: string | null;
    specimen_note: string | null;
    based_on: string | null;
    based_on_code: string | null;
    based_on_system: string | null;
    based_on_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    form_content_type: string | null;
    form_url: string | null;
    form_title: string | null;
    form_text: string | null;
    effective_at: string | null;
    issued_at: string | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
};
export type Dispense = {
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    status: "preparation" | "in-progress" | "cancelled" | "on-hold" | "completed" | "entered-in-error" | "stopped" | "declined" | "unknown" | null;
    status_reason: string | null;
    category: string | null;
    medication: string | null;
    medication_code: string | null;
    code_system: string | null;
    medication_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    medication_form: string | null;
    medication_form_code: string | null;
    medication_form_system: string | null;
    medication_ingredients: Array<{
        name: string | null;
        code: string | null;
        system: string | null;
        strength: string | null;
        active: boolean | null;
    }> | null;
    prescription_ids: Array<FhirId> | null;
    type: string | null;
    type_code: string | null;
    type_system: string | null;
    quantity: number | null;
    quantity_unit: string | null;
    days_supply: number | null;
    days_supply_unit: string | null;
    prepared_at: string | null;
    handed_over_at: string | null;
    performer_references: Array<string> | null;
    performer: string | null;
    location: string | null;
    dosage_text: string | null;
    timing_code: string | null;
    timing_system: string | null;
    was_substituted: boolean | null;
    substitution_type: string | null;
    substitution_type_code: string | null;
    substitution_type_system: string | null;
    substitution_reason: string | null;
    substitution_reason_code: string | null;
    substitution_reason_system: string | null;
    substitution: string | null;
    note: string | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
};
export type EncounterPush = {
    /** Health ID (see resolve) */
    health_id: string;
    /** A visits record as records retrieval returns it, pushed back whole instead of the fields below (which must then be left out); `id` is ignored, a new resource is written */
    record?: {
        diet_preference_codings?: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        special_arrangement_codings?: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        status_history?: Array<{
            status: string | null;
            start: string | null;
            end: string | null;
        }> | null;
        class_history?: Array<{
            class: string | null;
            system: string | null;
            start: string | null;
            end: string | null;
        }> | null;
        id?: FhirId;
        patient_id?: FhirId | null;
        type?: string | null;
        service_codings?: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        service?: string | null;
        part_of_id?: FhirId | null;
        class?: string | null;
        class_coding?: {
            system: string | null;
            code: string | null;
            display: string | null;
        } | null;
        status?: "planned" | "arrived" | "triaged" | "in-progress" | "onleave" | "finished" | "cancelled" | "entered-in-error" | "unknown" | null;
        reason_references?: Array<string> | null;
        reason?: string | null;
        reason_codings?: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        reasons?: Array<{
            text: string | null;
            codings: Array<{
                system: string | null;
                code: string | null;
                display: string | null;
            }> | null;
        }> | null;
        reasons_referenced?: string | null;
        provider_id?: FhirId | null;
        facility_id?: FhirId | null;
        provider?: string | null;
        participants?: Array<{
            provider_id: FhirId | null;
            name: string | null;
            role: string | null;
            role_code: string | null;
            role_system: string | null;
        }> | null;
        facility?: string | null;
        started_at?: string | null;
        ended_at?: string | null;
        note?: string | null;
        priority?: string | null;
        priority_code?: string | null;
        priority_system?: string | null;
        location?: string | null;
        locations?: Array<{
            location: string | null;
            location_reference: string | null;
            status: string | null;
            physical_type: string | null;
            physical_type_code: string | null;
            physical_type_system: string | null;
            start: string | null;
            end: string | null;
        }> | null;
        length?: string | null;
        length_quantity?: {
            value: number | null;
            unit: string | null;
            system: string | null;
            code: string | null;
        } | null;
        admit_source?: string | null;
        admit_source_code?: string | null;
        admit_source_system?: string | null;
        discharge_disposition?: string | null;
        discharge_disposition_code?: string | null;
        discharge_disposition_system?: string | null;
        origin?: string | null;
        destination?: string | null;
        participant_references?: Array<string> | null;
        episode_of_care_references?: Array<string> | null;
        diagnosis_ids?: Array<FhirId> | null;
        diagnoses?: Array<{
            condition_id: FhirId | null;
            condition_reference: string | null;
            condition: string | null;
            use: string | null;
            use_code: string | null;
            use_system: string | null;
            rank: number | null;
        }> | null;
        primary_diagnosis_id?: FhirId | null;
        primary_diagnosis?: string | null;
        readmission?: string | null;
        special_arrangements?: string | null;
        diet_preferences?: string | null;
        types?: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        type_concepts?: Array<{
            text: string | null;
            codings: Array<{
                system: string | null;
                code: string | null;
                display: string | null;
            }> | null;
        }> | null;
        identifiers?: Array<{
            system: string | null;
            value: string | null;
            type: string | null;
        }> | null;
    };
    /** What kind of encounter, e.g. consultation, or cdss_alert for a decision-support alert (required without `record`) */
    encounter_type?: string;
    clinical_note?: string;
    /** Default finished */
    status?: "planned" | "arrived" | "triaged" | "in-progress" | "onleave" | "finished" | "cancelled";
    /** v3 ActCode: AMB ambulatory (default), EMER emergency, IMP inpatient, VR virtual, HH home health */
    class?: "AMB" | "EMER" | "IMP" | "VR" | "HH";
    reason?: string;
    /** A FHIR dateTime (the day alone when that is all that is known); default now */
    started_at?: string;
    /** Default now for a finished encounter pushed with no started_at; none when started_at is given */
    ended_at?: string;
    /** Required for cdss_alert: e.g. drug_interaction, duplicate_therapy, contraindication, dose_range, allergy_alert */
    alert_type?: string;
    /** Required for cdss_alert */
    severity?: "high" | "moderate" | "low";
    /** The decision-support rule that raised the alert */
    cdss_rule_id?: string;
};
export type EncounterPushed = {
    health_id: string;
    /** The FHIR Encounter */
    encounter_id: string;
    /** The FHIR DetectedIssue of a cdss_alert, else null */
    detected_issue_id: string | null;
    /** Recorded as the author */
    organization_id: string | null;
    created_at: string;
    /** For a pushed `record`: its fields with a value that the FHIR written does not hold as given (a field read only, such as a name Pont reads from another resource or a visit's admission source), so read the record back for what was kept; empty when all was written */
    not_written?: Array<string>;
};
export type EpisodeOfCare = {
    id: FhirId;
    patient_id: FhirId | null;
    status: "planned" | "waitlist" | "active" | "onhold" | "finished" | "cancelled" | "entered-in-error" | null;
    status_history: Array<{
        status: "planned" | "waitlist" | "active" | "onhold" | "finished" | "cancelled" | "entered-in-error" | null;
        start: string | null;
        end: string | null;
    }> | null;
    type: string | null;
    type_code: string | null;
    type_system: string | null;
    diagnoses: Array<{
        condition_reference: string | null;
        condition: string | null;
        role: string | null;
        role_code: string | null;
        rank: number | null;
    }> | null;
    start: string | null;
    end: string | null;
    managing_organization: string | null;
    managing_organization_reference: string | null;
    care_manager: string | null;
    care_manager_reference: string | null;
    team_references: Array<string> | null;
    referral_request_references: Array<string> | null;
    account_references: Array<string> | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
};
/** Error shape of every non-FHIR route (section 2.9). */
export type Error = {
    status: "error";
    /** Machine code, e.g. VALIDATION_FAILED */
    error_code: string;
    /** Human-readable text */
    message: string;
    [key: string]: unknown;
};
export type FamilyHistory = {
    id: FhirId;
    patient_id: FhirId | null;
    status: "partial" | "completed" | "entered-in-error" | "health-unknown" | null;
    data_absent_reason: string | null;
    recorded_at: string | null;
    relationship: string | null;
    relationship_code: string | null;
    relationship_system: string | null;
    name: string | null;
    sex: string | null;
    born: string | null;
    age: string | null;
    estimated_age: boolean | null;
    deceased: boolean | null;
    deceased_text: string | null;
    reason: string | null;
    reason_references: Array<string> | null;
    conditions: Array<string> | null;
    condition_list: Array<{
        name: string | null;
        codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        onset: string | null;
        outcome: string | null;
        contributed_to_death: boolean | null;
        note: string | null;
    }> | null;
    note: string | null;
};
/** A FHIR resource id: 1-64 of A-Z a-z 0-9 - and . (ids Pont generates are UUIDs; a resource another system wrote keeps its own id, e.g. 123) */
export type FhirId = string;
export type Flag = {
    id: FhirId;
    patient_id: FhirId | null;
    status: "active" | "inactive" | "entered-in-error" | null;
    text: string | null;
    codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    category: string | null;
    category_code: string | null;
    category_system: string | null;
    start: string | null;
    end: string | null;
    visit_id: FhirId | null;
    author: string | null;
    author_reference: string | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
};
export type Goal = {
    id: FhirId;
    patient_id: FhirId | null;
    lifecycle_status: "proposed" | "planned" | "accepted" | "active" | "on-hold" | "completed" | "cancelled" | "entered-in-error" | "rejected" | null;
    achievement_status: string | null;
    achievement_code: string | null;
    achievement_system: string | null;
    category: string | null;
    categories: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    priority: string | null;
    priority_code: "high-priority" | "medium-priority" | "low-priority" | null;
    description: string | null;
    description_code: string | null;
    description_code_system: string | null;
    start_date: string | null;
    target_measure: string | null;
    target_measure_code: string | null;
    target_measure_system: string | null;
    target_value: number | null;
    target_comparator: "<" | "<=" | ">=" | ">" | null;
    target_unit: string | null;
    target_text: string | null;
    target_due_date: string | null;
    target_due_in: string | null;
    targets: Array<{
        measure: string | null;
        measure_code: string | null;
        measure_system: string | null;
        value: number | null;
        comparator: "<" | "<=" | ">=" | ">" | null;
        unit: string | null;
        text: string | null;
        unit_code: string | null;
        codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        due_date: string | null;
        due_in: string | null;
        due_in_code: string | null;
    }> | null;
    status_date: string | null;
    status_reason: string | null;
    expressed_by: string | null;
    expressed_by_reference: string | null;
    addresses_references: Array<string> | null;
    addresses: string | null;
    outcome: string | null;
    note: string | null;
};
export type HealthIdResolveRequest = {
    /** Known Health ID to look up (never creates a patient). Health ID: ISO 3166-1 alpha-2 country code, 10 digits, 2 check digits (14 characters, e.g. CM482930174629); the check digits make the whole ID, letters read as numbers A=10 … Z=35, equal 1 modulo 97 (ISO 7064 MOD 97-10, as in IBAN). */
    health_id?: string | null;
    /** Required when no health_id */
    first_name?: string | null;
    last_name?: string | null;
    date_of_birth?: string | null;
    /** Country that issues a new Health ID (its prefix); default CM */
    country_code?: string | null;
    sex?: "male" | "female" | "other" | null;
    /** Stored only when a patient is created */
    phone_number?: string | null;
    /** Reason for the lookup; written to the audit trail */
    purpose?: string | null;
    /** Caller's own patient id; written to the audit trail */
    external_reference?: string | null;
};
export type HealthIdResolveResponse = {
    status: "found" | "created" | "not_found";
    health_id: string;
    /** Absent when not_found */
    patient?: PatientDemographics;
};
export type HealthIdVerifyResponse = {
    valid: true;
    health_id: string;
    patient: PatientDemographics;
};
/** A kind of record (mappings/tables/hi-types.yaml: its data classes and FHIR resource types) */
export type HiType = "Prescription" | "DiagnosticReport" | "OPConsultation" | "DischargeSummary" | "ImmunizationRecord" | "HealthDocumentRecord" | "WellnessRecord";
export type ImagingStudy = {
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    status: "registered" | "available" | "cancelled" | "entered-in-error" | "unknown" | null;
    started_at: string | null;
    description: string | null;
    procedure: string | null;
    procedure_code: string | null;
    procedure_code_system: string | null;
    procedure_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    modalities: Array<string> | null;
    study_uid: string | null;
    accession_number: string | null;
    number_of_series: number | null;
    number_of_instances: number | null;
    reason: string | null;
    reason_code: string | null;
    reason_code_system: string | null;
    reason_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    reason_references: Array<string> | null;
    referrer: string | null;
    referrer_reference: string | null;
    interpreter: string | null;
    location: string | null;
    based_on_references: Array<string> | null;
    procedure_reference: string | null;
    series: Array<{
        uid: string | null;
        number: number | null;
        modality: string | null;
        description: string | null;
        body_site: string | null;
        body_site_code: string | null;
        laterality: string | null;
        number_of_instances: number | null;
        started_at: string | null;
    }> | null;
    note: string | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
};
export type Immunization = {
    funding_source: string | null;
    funding_source_code: string | null;
    funding_source_system: string | null;
    program_eligibility: string | null;
    program_eligibility_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    vaccine: string | null;
    cvx_code: string | null;
    vaccine_code: string | null;
    vaccine_code_system: string | null;
    status: "completed" | "entered-in-error" | "not-done" | null;
    status_reason: string | null;
    status_reason_code: string | null;
    status_reason_system: string | null;
    occurred_at: string | null;
    occurrence_text: string | null;
    primary_source: boolean | null;
    report_origin: string | null;
    report_origin_code: string | null;
    report_origin_system: string | null;
    performer: string | null;
    performers: Array<{
        reference: string | null;
        name: string | null;
        function: string | null;
        function_code: string | null;
        function_system: string | null;
    }> | null;
    location: string | null;
    lot_number: string | null;
    dose_number: number | null;
    dose_number_text: string | null;
    series: string | null;
    series_doses: number | null;
    target_disease: string | null;
    target_disease_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    reaction: string | null;
    reaction_references: Array<string> | null;
    reaction_date: string | null;
    target_disease_code: string | null;
    target_disease_system: string | null;
    dose_quantity: number | null;
    dose_unit: string | null;
    dose_unit_code: string | null;
    expiration_date: string | null;
    manufacturer: string | null;
    reason_references: Array<string> | null;
    reason: string | null;
    reason_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    is_subpotent: boolean | null;
    subpotent_reason: string | null;
    subpotent_reason_code: string | null;
    subpotent_reason_system: string | null;
    site: string | null;
    site_code: string | null;
    site_system: string | null;
    route: string | null;
    route_code: string | null;
    route_system: string | null;
    route_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    note: string | null;
    vaccine_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
};
export type ImmunizationEvaluation = {
    id: FhirId;
    patient_id: FhirId | null;
    status: "completed" | "entered-in-error" | null;
    date: string | null;
    authority: string | null;
    authority_reference: string | null;
    target_disease: string | null;
    target_disease_code: string | null;
    target_disease_system: string | null;
    immunization_id: FhirId | null;
    dose_status: string | null;
    dose_status_code: "valid" | "notvalid" | null;
    dose_status_reason: string | null;
    dose_status_reason_code: string | null;
    description: string | null;
    series: string | null;
    dose_number: number | null;
    dose_number_text: string | null;
    series_doses: number | null;
    series_doses_text: string | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
};
export type ImmunizationRecommendation = {
    id: FhirId;
    patient_id: FhirId | null;
    date: string | null;
    authority: string | null;
    authority_reference: string | null;
    vaccine: string | null;
    forecast_status: string | null;
    forecast_status_code: string | null;
    due_date: string | null;
    recommendations: Array<{
        vaccine: string | null;
        vaccine_code: string | null;
        vaccine_system: string | null;
        target_disease: string | null;
        target_disease_code: string | null;
        target_disease_system: string | null;
        contraindicated_vaccines: string | null;
        forecast_status: string | null;
        forecast_status_code: "due" | "overdue" | "immune" | "contraindicated" | "complete" | null;
        forecast_reason: string | null;
        due_date: string | null;
        earliest_date: string | null;
        latest_date: string | null;
        overdue_date: string | null;
        date_criteria: Array<{
            code: string | null;
            system: string | null;
            name: string | null;
            value: string | null;
        }> | null;
        description: string | null;
        series: string | null;
        dose_number: number | null;
        dose_number_text: string | null;
        series_doses: number | null;
        series_doses_text: string | null;
        supporting_immunization_references: Array<string> | null;
        supporting_patient_information_references: Array<string> | null;
    }> | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
};
export type IntrospectionRequest = {
    /** The access token to introspect */
    token: string;
    token_type_hint?: string;
    /** Caller's client id, when not using HTTP Basic, Bearer or X-Client-ID */
    client_id?: string;
    client_secret?: string;
};
/** RFC 7662. Exactly {"active": false} for any token that is not a live token of ours. */
export type IntrospectionResponse = {
    active: boolean;
    token_type?: string;
    scope?: string;
    client_id?: string;
    sub?: string;
    aud?: string;
    iss?: string;
    exp?: number;
    iat?: number;
    jti?: string;
};
export type Jwk = {
    kty: string;
    use: string;
    alg: string;
    kid: string;
    n: string;
    e: string;
};
export type Jwks = {
    keys: Array<Jwk>;
};
export type LabResult = {
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    test_name: string | null;
    loinc_code: string | null;
    value_boolean: boolean | null;
    value_time: string | null;
    value_date_time: string | null;
    value_period: {
        start: string | null;
        end: string | null;
    } | null;
    value_sampled_data: {
        data: string | null;
        origin: {
            value: number | null;
            unit: string | null;
            system: string | null;
            code: string | null;
        } | null;
        period: number | null;
        factor: number | null;
        lower_limit: number | null;
        upper_limit: number | null;
        dimensions: number | null;
    } | null;
    value: string | null;
    value_integer: number | null;
    value_numeric: number | null;
    value_range: {
        low: number | null;
        high: number | null;
        unit: string | null;
        unit_code: string | null;
    } | null;
    value_ratio: {
        numerator: number | null;
        numerator_unit: string | null;
        numerator_unit_code: string | null;
        denominator: number | null;
        denominator_unit: string | null;
        denominator_unit_code: string | null;
    } | null;
    comparator: "<" | "<=" | ">=" | ">" | null;
    value_precision: number | null;
    unit: string | null;
    unit_code: string | null;
    value_coded: string | null;
    value_code: string | null;
    value_code_system: string | null;
    components: string | null;
    data_absent_reason: string | null;
    data_absent_code: string | null;
    reference_low: number | null;
    reference_high: number | null;
    reference_range_unit: string | null;
    reference_range_text: string | null;
    flag: "N" | "A" | "AA" | "H" | "HH" | "HU" | "H>" | "L" | "LL" | "LU" | "L<" | "<" | ">" | "POS" | "NEG" | "IND" | "DET" | "ND" | "E" | "EXP" | "UNE" | "NR" | "RR" | "WR" | "S" | "R" | "I" | "MS" | "VS" | "SDD" | "NCL" | "NS" | "SYN-R" | "SYN-S" | "B" | "D" | "U" | "W" | "AC" | "IE" | "QCF" | "TOX" | "CAR" | "Carrier" | "EX" | "HX" | "LX" | null;
    flag_level: "normal" | "abnormal" | "low" | "high" | "critical" | "critical_low" | "critical_high" | null;
    interpretation: string | null;
    status: "registered" | "preliminary" | "final" | "amended" | "corrected" | "cancelled" | "entered-in-error" | "unknown" | null;
    effective_events: Array<string> | null;
    effective_timing_code: string | null;
    effective_timing_system: string | null;
    effective_at: string | null;
    effective_end: string | null;
    issued_at: string | null;
    method_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    method: string | null;
    body_site: string | null;
    body_site_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    specimen: string | null;
    specimen_note: string | null;
    performer: string | null;
    based_on: string | null;
    based_on_code: string | null;
    based_on_system: string | null;
    based_on_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    specimen_reference: string | null;
    based_on_references: Array<string> | null;
    performer_references: Array<string> | null;
    performed_by_patient: boolean | null;
    focus: string | null;
    focus_references: Array<string> | null;
    device: string | null;
    device_reference: string | null;
    device_type: string | null;
    device_type_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    member_ids: Array<FhirId> | null;
    derived_from_ids: Array<FhirId> | null;
    notes: Array<{
        text: string | null;
        author: string | null;
        author_string: string | null;
        author_reference: string | null;
        time: string | null;
    }> | null;
    note: string | null;
    codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    categories: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    component_list: Array<{
        name: string | null;
        code: string | null;
        system: string | null;
        display: string | null;
        codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        value_numeric: number | null;
        value_integer: number | null;
        value_boolean: boolean | null;
        value_time: string | null;
        value_date_time: string | null;
        value_period: {
            start: string | null;
            end: string | null;
        } | null;
        value_range: {
            low: number | null;
            high: number | null;
            unit: string | null;
            unit_code: string | null;
        } | null;
        value_ratio: {
            numerator: number | null;
            numerator_unit: string | null;
            numerator_unit_code: string | null;
            denominator: number | null;
            denominator_unit: string | null;
            denominator_unit_code: string | null;
        } | null;
        value_precision: number | null;
        comparator: "<" | "<=" | ">=" | ">" | null;
        unit: string | null;
        unit_code: string | null;
        value: string | null;
        value_coded: string | null;
        value_code: string | null;
        value_code_system: string | null;
        value_codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        interpretations: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        data_absent_reason: string | null;
        data_absent_code: string | null;
        reference_ranges: Array<{
            low: number | null;
            high: number | null;
            unit: string | null;
            unit_code: string | null;
            text: string | null;
            type: string | null;
            type_codings: Array<{
                system: string | null;
                code: string | null;
                display: string | null;
            }> | null;
            type_text: string | null;
            applies_to: string | null;
            applies_to_concepts: Array<{
                text: string | null;
                codings: Array<{
                    system: string | null;
                    code: string | null;
                    display: string | null;
                }> | null;
            }> | null;
            age_low: number | null;
            age_high: number | null;
            age_unit: string | null;
            age_unit_code: string | null;
        }> | null;
    }> | null;
    interpretations: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    reference_ranges: Array<{
        low: number | null;
        high: number | null;
        unit: string | null;
        unit_code: string | null;
        text: string | null;
        type: string | null;
        type_codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        type_text: string | null;
        applies_to: string | null;
        applies_to_concepts: Array<{
            text: string | null;
            codings: Array<{
                system: string | null;
                code: string | null;
                display: string | null;
            }> | null;
        }> | null;
        age_low: number | null;
        age_high: number | null;
        age_unit: string | null;
        age_unit_code: string | null;
    }> | null;
    value_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
    source: string;
};
export type LabResultPush = {
    /** Health ID (see resolve) */
    health_id: string;
    /** A lab_results record as records retrieval returns it, pushed back whole instead of the fields below (which must then be left out); `id` is ignored, a new resource is written */
    record?: {
        id?: FhirId;
        patient_id?: FhirId | null;
        visit_id?: FhirId | null;
        test_name?: string | null;
        loinc_code?: string | null;
        value_boolean?: boolean | null;
        value_time?: string | null;
        value_date_time?: string | null;
        value_period?: {
            start: string | null;
            end: string | null;
        } | null;
        value_sampled_data?: {
            data: string | null;
            origin: {
                value: number | null;
                unit: string | null;
                system: string | null;
                code: string | null;
            } | null;
            period: number | null;
            factor: number | null;
            lower_limit: number | null;
            upper_limit: number | null;
            dimensions: number | null;
        } | null;
        value?: string | null;
        value_integer?: number | null;
        value_numeric?: number | null;
        value_range?: {
            low: number | null;
            high: number | null;
            unit: string | null;
            unit_code: string | null;
        } | null;
        value_ratio?: {
            numerator: number | null;
            numerator_unit: string | null;
            numerator_unit_code: string | null;
            denominator: number | null;
            denominator_unit: string | null;
            denominator_unit_code: string | null;
        } | null;
        comparator?: "<" | "<=" | ">=" | ">" | null;
        value_precision?: number | null;
        unit?: string | null;
        unit_code?: string | null;
        value_coded?: string | null;
        value_code?: string | null;
        value_code_system?: string | null;
        components?: string | null;
        data_absent_reason?: string | null;
        data_absent_code?: string | null;
        reference_low?: number | null;
        reference_high?: number | null;
        reference_range_unit?: string | null;
        reference_range_text?: string | null;
        flag?: "N" | "A" | "AA" | "H" | "HH" | "HU" | "H>" | "L" | "LL" | "LU" | "L<" | "<" | ">" | "POS" | "NEG" | "IND" | "DET" | "ND" | "E" | "EXP" | "UNE" | "NR" | "RR" | "WR" | "S" | "R" | "I" | "MS" | "VS" | "SDD" | "NCL" | "NS" | "SYN-R" | "SYN-S" | "B" | "D" | "U" | "W" | "AC" | "IE" | "QCF" | "TOX" | "CAR" | "Carrier" | "EX" | "HX" | "LX" | null;
        flag_level?: "normal" | "abnormal" | "low" | "high" | "critical" | "critical_low" | "critical_high" | null;
        interpretation?: string | null;
        status?: "registered" | "preliminary" | "final" | "amended" | "corrected" | "cancelled" | "entered-in-error" | "unknown" | null;
        effective_events?: Array<string> | null;
        effective_timing_code?: string | null;
        effective_timing_system?: string | null;
        effective_at?: string | null;
        effective_end?: string | null;
        issued_at?: string | null;
        method_codings?: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        method?: string | null;
        body_site?: string | null;
        body_site_codings?: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        specimen?: string | null;
        specimen_note?: string | null;
        performer?: string | null;
        based_on?: string | null;
        based_on_code?: string | null;
        based_on_system?: string | null;
        based_on_codings?: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        specimen_reference?: string | null;
        based_on_references?: Array<string> | null;
        performer_references?: Array<string> | null;
        performed_by_patient?: boolean | null;
        focus?: string | null;
        focus_references?: Array<string> | null;
        device?: string | null;
        device_reference?: string | null;
        device_type?: string | null;
        device_type_codings?: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        member_ids?: Array<FhirId> | null;
        derived_from_ids?: Array<FhirId> | null;
        notes?: Array<{
            text: string | null;
            author: string | null;
            author_string: string | null;
            author_reference: string | null;
            time: string | null;
        }> | null;
        note?: string | null;
        codings?: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        categories?: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        component_list?: Array<{
            name: string | null;
            code: string | null;
            system: string | null;
            display: string | null;
            codings: Array<{
                system: string | null;
                code: string | null;
                display: string | null;
            }> | null;
            value_numeric: number | null;
            value_integer: number | null;
            value_boolean: boolean | null;
            value_time: string | null;
            value_date_time: string | null;
            value_period: {
                start: string | null;
                end: string | null;
            } | null;
            value_range: {
                low: number | null;
                high: number | null;
                unit: string | null;
                unit_code: string | null;
            } | null;
            value_ratio: {
                numerator: number | null;
                numerator_unit: string | null;
                numerator_unit_code: string | null;
                denominator: number | null;
                denominator_unit: string | null;
                denominator_unit_code: string | null;
            } | null;
            value_precision: number | null;
            comparator: "<" | "<=" | ">=" | ">" | null;
            unit: string | null;
            unit_code: string | null;
            value: string | null;
            value_coded: string | null;
            value_code: string | null;
            value_code_system: string | null;
            value_codings: Array<{
                system: string | null;
                code: string | null;
                display: string | null;
            }> | null;
            interpretations: Array<{
                system: string | null;
                code: string | null;
                display: string | null;
            }> | null;
            data_absent_reason: string | null;
            data_absent_code: string | null;
            reference_ranges: Array<{
                low: number | null;
                high: number | null;
                unit: string | null;
                unit_code: string | null;
                text: string | null;
                type: string | null;
                type_codings: Array<{
                    system: string | null;
                    code: string | null;
                    display: string | null;
                }> | null;
                type_text: string | null;
                applies_to: string | null;
                applies_to_concepts: Array<{
                    text: string | null;
                    codings: Array<{
                        system: string | null;
                        code: string | null;
                        display: string | null;
                    }> | null;
                }> | null;
                age_low: number | null;
                age_high: number | null;
                age_unit: string | null;
                age_unit_code: string | null;
            }> | null;
        }> | null;
        interpretations?: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        reference_ranges?: Array<{
            low: number | null;
            high: number | null;
            unit: string | null;
            unit_code: string | null;
            text: string | null;
            type: string | null;
            type_codings: Array<{
                system: string | null;
                code: string | null;
                display: string | null;
            }> | null;
            type_text: string | null;
            applies_to: string | null;
            applies_to_concepts: Array<{
                text: string | null;
                codings: Array<{
                    system: string | null;
                    code: string | null;
                    display: string | null;
                }> | null;
            }> | null;
            age_low: number | null;
            age_high: number | null;
            age_unit: string | null;
            age_unit_code: string | null;
        }> | null;
        value_codings?: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        identifiers?: Array<{
            system: string | null;
            value: string | null;
            type: string | null;
        }> | null;
        source?: string;
    };
    test_name?: string;
    /** A decimal number, or a limit such as "<5" or ">=200", is stored as a quantity (with `unit` and the comparator); anything else (e.g. "positive") as text, and then `unit` is refused (422) */
    result_value?: string;
    /** Outside the normal range; leave it out when the result has no interpretation (none is written) */
    flagged?: boolean;
    /** How far out, each level an interpretation code (mappings/lab-result.map.yaml, `flag_level`); default abnormal when flagged, normal when not flagged, none without `flagged` */
    flag_level?: "normal" | "abnormal" | "low" | "high" | "critical" | "critical_low" | "critical_high";
    /** The result in words; the report's conclusion */
    interpretation?: string;
    /** Unit of a numeric result, e.g. g/dL: a UCUM unit is written as one (system and code), any other as words */
    unit?: string;
    loinc_code?: string;
    reference_low?: number;
    reference_high?: number;
    /** Default final (a final result raises lab_result.released) */
    status?: "registered" | "preliminary" | "final" | "amended" | "corrected" | "cancelled" | "entered-in-error" | "unknown";
    /** When the specimen was taken (a FHIR dateTime: the day alone when that is all that is known); default now */
    effective_at?: string;
};
export type LabResultPushed = {
    health_id: string;
    /** The FHIR resource written: the Observation (a record from a report: its DiagnosticReport) */
    lab_result_id: string;
    /** The FHIR DiagnosticReport that issues it (a pushed `record` from a report: that report, also lab_result_id; of an Observation: none) */
    diagnostic_report_id: string | null;
    /** Whether an interpretation other than normal was stored; null when none was */
    flagged: boolean | null;
    /** The interpretation code stored, null when none */
    flag: string | null;
    created_at: string;
    /** For a pushed `record`: its fields with a value that the FHIR written does not hold as given (a field read only, such as a name Pont reads from another resource or a visit's admission source), so read the record back for what was kept; empty when all was written */
    not_written?: Array<string>;
};
export type MediaRecord = {
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    status: "preparation" | "in-progress" | "not-done" | "on-hold" | "stopped" | "completed" | "entered-in-error" | "unknown" | null;
    type: string | null;
    type_code: string | null;
    type_system: string | null;
    modality: string | null;
    modality_code: string | null;
    modality_system: string | null;
    view: string | null;
    body_site: string | null;
    body_site_code: string | null;
    body_site_system: string | null;
    reason: string | null;
    created_at: string | null;
    issued_at: string | null;
    operator: string | null;
    operator_reference: string | null;
    device: string | null;
    content_type: string | null;
    url: string | null;
    size: number | null;
    title: string | null;
    inline: boolean | null;
    height: number | null;
    width: number | null;
    frames: number | null;
    duration: number | null;
    note: string | null;
};
export type MedicalDevice = {
    id: FhirId;
    patient_id: FhirId | null;
    status: "active" | "completed" | "entered-in-error" | "intended" | "stopped" | "on-hold" | null;
    device: string | null;
    device_reference: string | null;
    device_status: "active" | "inactive" | "entered-in-error" | "unknown" | null;
    device_type: string | null;
    device_type_code: string | null;
    device_type_system: string | null;
    udi_carrier: string | null;
    udi_device_identifier: string | null;
    udi_carriers: Array<{
        device_identifier: string | null;
        carrier_hrf: string | null;
        issuer: string | null;
        jurisdiction: string | null;
    }> | null;
    distinct_identifier: string | null;
    serial_number: string | null;
    lot_number: string | null;
    manufacturer: string | null;
    model_number: string | null;
    versions: Array<{
        type: string | null;
        value: string | null;
    }> | null;
    manufacture_date: string | null;
    expiration_date: string | null;
    body_site: string | null;
    reason: string | null;
    reason_references: Array<string> | null;
    used_from: string | null;
    used_until: string | null;
    recorded_at: string | null;
    note: string | null;
    source: string;
};
export type MedicationUse = {
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    status: "active" | "completed" | "entered-in-error" | "intended" | "stopped" | "on-hold" | "unknown" | "not-taken" | null;
    status_reason: string | null;
    status_reason_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    category: string | null;
    medication: string | null;
    medication_code: string | null;
    code_system: string | null;
    medication_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    medication_form: string | null;
    medication_form_code: string | null;
    medication_form_system: string | null;
    medication_ingredients: Array<{
        name: string | null;
        code: string | null;
        system: string | null;
        strength: string | null;
        active: boolean | null;
    }> | null;
    effective_at: string | null;
    effective_end: string | null;
    asserted_at: string | null;
    information_source: string | null;
    information_source_reference: string | null;
    based_on_references: Array<string> | null;
    reason_references: Array<string> | null;
    reason: string | null;
    reason_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    dosage_text: string | null;
    dose: number | null;
    dose_unit: string | null;
    dose_range: string | null;
    frequency: number | null;
    period: number | null;
    period_unit: "s" | "min" | "h" | "d" | "wk" | "mo" | "a" | null;
    period_max: number | null;
    timing: string | null;
    as_needed_reason: string | null;
    as_needed: boolean | null;
    route: string | null;
    route_code: string | null;
    route_system: string | null;
    note: string | null;
};
export type MobileTokenRequest = {
    health_id: string;
    code: string;
};
export type MobileTokenResponse = {
    access_token: string;
    token_type: "Bearer";
    expires_in: number;
};
export type MyConsents = {
    items: Array<ConsentStatus>;
};
export type NutritionOrder = {
    food_preference_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    oral_diet_type_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    nutrient_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    texture_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    status: "draft" | "active" | "on-hold" | "revoked" | "completed" | "entered-in-error" | "unknown" | null;
    intent: "proposal" | "plan" | "directive" | "order" | "original-order" | "reflex-order" | "filler-order" | "instance-order" | "option" | null;
    ordered_at: string | null;
    orderer: string | null;
    orderer_reference: string | null;
    allergy_intolerance_references: Array<string> | null;
    allergy_intolerances: string | null;
    food_preference_modifiers: Array<string> | null;
    exclude_foods: Array<string> | null;
    oral_diet: {
        types: Array<string> | null;
        schedule: string | null;
        frequency: number | null;
        period: number | null;
        period_unit: "s" | "min" | "h" | "d" | "wk" | "mo" | "a" | null;
        start: string | null;
        nutrients: Array<{
            nutrient: string | null;
            amount: number | null;
            unit: string | null;
        }> | null;
        textures: Array<{
            texture: string | null;
            food_type: string | null;
        }> | null;
        fluid_consistency: Array<string> | null;
        instruction: string | null;
    } | null;
    supplements: Array<{
        type: string | null;
        product_name: string | null;
        quantity: number | null;
        quantity_unit: string | null;
        schedule: string | null;
        frequency: number | null;
        period: number | null;
        period_unit: "s" | "min" | "h" | "d" | "wk" | "mo" | "a" | null;
        start: string | null;
        instruction: string | null;
    }> | null;
    enteral_formula: {
        base_formula: string | null;
        base_formula_product: string | null;
        additive: string | null;
        additive_product: string | null;
        caloric_density: number | null;
        caloric_density_unit: string | null;
        route: string | null;
        rate: string | null;
        volume: string | null;
        max_volume: string | null;
        instruction: string | null;
    } | null;
    note: string | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
};
/** The Error shape, with the RFC 6749 fields OAuth libraries read. */
export type OAuthError = {
    status: "error";
    error_code: string;
    message: string;
    /** RFC 6749 §5.2 code */
    error: "invalid_request" | "invalid_client" | "unsupported_grant_type" | "invalid_scope";
    error_description: string;
};
/** RFC 8414 */
export type OAuthServerMetadata = {
    issuer: string;
    token_endpoint: string;
    introspection_endpoint: string;
    jwks_uri: string;
    grant_types_supported: Array<string>;
    scopes_supported: Array<string>;
    [key: string]: unknown;
};
export type OperationOutcome = {
    resourceType: "OperationOutcome";
    issue: Array<Record<string, unknown>>;
};
export type Order = {
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    status: "draft" | "active" | "on-hold" | "revoked" | "completed" | "entered-in-error" | "unknown" | null;
    intent: "proposal" | "plan" | "directive" | "order" | "original-order" | "reflex-order" | "filler-order" | "instance-order" | "option" | null;
    priority: "routine" | "urgent" | "asap" | "stat" | null;
    do_not_perform: boolean | null;
    category: string | null;
    category_code: string | null;
    category_system: string | null;
    categories: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    name: string | null;
    code: string | null;
    code_system: string | null;
    codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    order_detail: string | null;
    occurrence_at: string | null;
    occurrence_end: string | null;
    occurrence_timing: string | null;
    occurrence_duration: string | null;
    occurrence_count: number | null;
    as_needed_reason: string | null;
    as_needed: boolean | null;
    quantity: string | null;
    requested_at: string | null;
    requester: string | null;
    requester_reference: string | null;
    performer_type: string | null;
    performer_references: Array<string> | null;
    performer: string | null;
    location: string | null;
    reason_references: Array<string> | null;
    reason: string | null;
    reason_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    specimen_references: Array<string> | null;
    specimen_note: string | null;
    body_site: string | null;
    body_site_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    requisition: string | null;
    based_on_references: Array<string> | null;
    patient_instruction: string | null;
    note: string | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
};
export type PairingCode = {
    code: string;
    expires_at: string;
};
/** Basic demographics of a registered patient (no contact details; mappings/patient-demographics.map.yaml); null where unknown. */
export type PatientDemographics = {
    health_id: string;
    first_name: string | null;
    last_name: string | null;
    date_of_birth: string | null;
    sex: "male" | "female" | "other" | null;
    country_code: string | null;
};
export type PatientDocument = {
    security_label_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    master_identifier: string | null;
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    status: "current" | "superseded" | "entered-in-error" | null;
    doc_status: "preliminary" | "final" | "amended" | "entered-in-error" | null;
    type: string | null;
    loinc_code: string | null;
    type_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    category: string | null;
    categories: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    description: string | null;
    title: string | null;
    content_type: string | null;
    language: string | null;
    url: string | null;
    size: number | null;
    inline: boolean | null;
    contents: Array<{
        content_type: string | null;
        url: string | null;
        title: string | null;
        size: number | null;
        inline: boolean | null;
        language: string | null;
        format: string | null;
        format_system: string | null;
        created_at: string | null;
    }> | null;
    author: string | null;
    author_type: string | null;
    author_type_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    authenticator: string | null;
    authenticator_reference: string | null;
    custodian: string | null;
    custodian_reference: string | null;
    event: string | null;
    event_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    practice_setting: string | null;
    facility_type: string | null;
    facility_type_code: string | null;
    facility_type_system: string | null;
    period_start: string | null;
    period_end: string | null;
    replaces_document_id: FhirId | null;
    related_references: Array<string> | null;
    relates_to: Array<{
        code: string | null;
        document_id: FhirId | null;
    }> | null;
    security_label: string | null;
    created_at: string | null;
};
/** The patient in the Connect shape of mappings/patient-profile.map.yaml. */
export type PatientProfile = {
    health_id: string;
    [key: string]: unknown;
};
export type PatientRecords = {
    health_id: string;
    type: string;
    /** Only the types asked for, newest first */
    records: {
        administrations?: Array<Administration>;
        adverse_events?: Array<AdverseEvent>;
        alerts?: Array<CdssAlert>;
        allergies?: Array<AllergyRecord>;
        appointments?: Array<Appointment>;
        assessments?: Array<Assessment>;
        body_structures?: Array<BodyStructure>;
        care_plans?: Array<CarePlan>;
        care_teams?: Array<CareTeam>;
        clinical_impressions?: Array<ClinicalImpression>;
        clinical_notes?: Array<ClinicalNote>;
        communication_requests?: Array<CommunicationRequest>;
        communications?: Array<Communication>;
        device_requests?: Array<DeviceRequest>;
        devices?: Array<MedicalDevice>;
        diagnoses?: Array<Diagnosis>;
        dispenses?: Array<Dispense>;
        documents?: Array<PatientDocument>;
        episodes_of_care?: Array<EpisodeOfCare>;
        family_history?: Array<FamilyHistory>;
        flags?: Array<Flag>;
        goals?: Array<Goal>;
        imaging_studies?: Array<ImagingStudy>;
        immunization_evaluations?: Array<ImmunizationEvaluation>;
        immunization_recommendations?: Array<ImmunizationRecommendation>;
        immunizations?: Array<Immunization>;
        lab_results?: Array<LabResult>;
        media?: Array<MediaRecord>;
        medication_statements?: Array<MedicationUse>;
        nutrition_orders?: Array<NutritionOrder>;
        observations?: Array<ClinicalObservation>;
        orders?: Array<Order>;
        prescriptions?: Array<Prescription>;
        procedures?: Array<Procedure>;
        reports?: Array<DiagnosticReportRecord>;
        risk_assessments?: Array<RiskAssessment>;
        specimens?: Array<Specimen>;
        tasks?: Array<Task>;
        vision_prescriptions?: Array<VisionPrescription>;
        visits?: Array<Visit>;
        vitals?: Array<Vital>;
    };
    /** A single type: the `cursor` of the next page, null at the end */
    next_cursor?: string | null;
    /** type=all: the types with more than `limit` records (page them by type) */
    truncated?: Array<string>;
    /** type=all: the types no consent covers for the caller (not read) */
    withheld?: Array<string>;
};
export type PatientSummary = {
    health_id: string;
    /** mappings/patient-summary.map.yaml */
    patient: {
        first_name: string | null;
        last_name: string | null;
        full_name: string | null;
        date_of_birth: string | null;
        sex: "male" | "female" | "other" | null;
        deceased: boolean | null;
        deceased_at: string | null;
        /** ABO and Rh, e.g. A+, from the newest LOINC 882-1 (or 883-9 with 10331-7) Observation (read as its lab record), else the Patient's */
        blood_group: "A+" | "A-" | "B+" | "B-" | "AB+" | "AB-" | "O+" | "O-" | null;
    };
    /** Active MedicationRequests, newest first, at most 50 */
    active_medications: Array<Prescription>;
    /** Active allergies, newest first, at most 100 */
    active_allergies: Array<AllergyRecord>;
    /** The 10 newest lab results */
    recent_labs: Array<LabResult>;
    /** The 5 newest encounters */
    recent_visits: Array<Visit>;
    /** Active care plans, newest first, at most 20 */
    active_care_plans: Array<CarePlan>;
    /** Goals active or accepted, newest first, at most 20 */
    active_goals: Array<Goal>;
    /** The 10 newest procedures completed or in progress */
    recent_procedures: Array<Procedure>;
    /** The patient's active devices (implants with their UDI) and devices in use, newest first, at most 20 */
    active_devices: Array<MedicalDevice>;
    /** Data classes no consent covers for the caller: their sections are empty */
    withheld: Array<string>;
};
export type PaymentReconciliationDay = {
    date: string;
    time_zone: string;
    facility_id: string | null;
    payments: Array<{
        /** The FHIR PaymentReconciliation */
        payment_id: string;
        facility_id: string;
        paid_at: string;
        payer: string | null;
        method: "cash" | "mobile_money" | "insurance" | "card";
        amount: number;
        /** ISO 4217 */
        currency: string;
        amount_due: number | null;
        reference: string | null;
        status: "active" | "cancelled" | "draft" | "entered-in-error";
        reconciled: boolean;
        problems: Array<"amount_mismatch" | "currency_mismatch" | "missing_reference">;
    }>;
    /** Of the active payments (cancelled ones are listed, not counted) */
    totals: {
        by_method: Array<{
            method: string;
            currency: string;
            count: number;
            amount: number;
        }>;
        by_currency: Array<{
            currency: string;
            count: number;
            amount: number;
        }>;
    };
    unreconciled: number;
};
export type PharmacyStock = {
    items: Array<PharmacyStockLine>;
    next_offset: number | null;
};
export type PharmacyStockApplied = {
    facility_id: string;
    lines: number;
    created: number;
    changed: number;
    unchanged: number;
};
export type PharmacyStockLine = {
    medication: {
        code: string;
        /** The code system URI, e.g. http://www.nlm.nih.gov/research/umls/rxnorm */
        code_system: string;
        display?: string | null;
    };
    quantity_on_hand: number;
    unit: string | null;
    reorder_level: number | null;
    batches: Array<{
        lot: string;
        expires_on: string | null;
        quantity: number;
    }>;
    facility_id: string;
    updated_at: string;
};
export type PharmacyStockUpdate = {
    facility_id: string;
    items: Array<{
        medication: {
            code: string;
            /** The code system URI, e.g. http://www.nlm.nih.gov/research/umls/rxnorm */
            code_system: string;
            display?: string | null;
        };
        quantity_on_hand: number;
        unit?: string | null;
        reorder_level?: number | null;
        /** When given, their quantities add up to quantity_on_hand */
        batches?: Array<{
            lot: string;
            expires_on?: string | null;
            quantity: number;
        }>;
    }>;
};
export type PortalActivity = {
    at: string;
    /** Client id, or the portal user */
    who: string;
    health_id: string | null;
    /** The operation */
    what: string;
    action: "create" | "read" | "update" | "delete" | "execute";
    purpose: string | null;
    break_glass: boolean;
};
export type PortalAgent = {
    agent_id: string;
    facility_id: string;
    last_seen_at: string | null;
    last_version: string | null;
    /** The agent's X-Bridge-Timestamp less server time at its last heartbeat */
    clock_skew_seconds: number | null;
    revoked_at: string | null;
    recent_batches: Array<{
        batch_id: string;
        created_at: string;
        counts: {
            [key: string]: number;
        } | null;
        errors: Array<string>;
    }>;
};
export type PortalClient = {
    client_id: string;
    name: string;
    organization_id: string;
    facility_id: string | null;
    scopes: Array<string>;
    /** Reads every patient without consent (an operator client, made only with `pont clients create --all-patients`) */
    all_patients: boolean;
    created_at: string;
    revoked_at: string | null;
    previous_secret_expires_at: string | null;
    /** When the client last got a token */
    last_used_at: string | null;
    /** How it authenticates: a secret, or signed assertions checked against its key set (jwks or jwks_uri) */
    token_endpoint_auth_method: "client_secret" | "private_key_jwt";
    /** Its public keys, when registered with a key set (never private material) */
    jwks: {
        keys: Array<{
            [key: string]: unknown;
        }>;
    } | null;
    /** Where its public keys are published, when registered so */
    jwks_uri: string | null;
};
export type PortalSession = {
    user: {
        id: string;
        organization_id: string;
        email: string;
        role: "admin" | "developer" | "viewer";
    };
    /** Send it in X-CSRF-Token with every state-changing request */
    csrf_token: string;
    /** When the session ends at the latest (PONT_PORTAL_SESSION_MAX after sign-in, default 12 h; it also ends after PONT_PORTAL_SESSION_IDLE without a request, default 30 minutes) */
    expires_at: string;
};
export type PortalSignIn = {
    email: string;
    password: string;
};
export type PortalUser = {
    id: string;
    organization_id: string;
    email: string;
    role: "admin" | "developer" | "viewer";
    active: boolean;
    created_at: string;
};
export type Prescription = {
    method_code: string | null;
    method_system: string | null;
    site_code: string | null;
    site_system: string | null;
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    prescriber_id: FhirId | null;
    prescriber: string | null;
    medication: string | null;
    medication_code: string | null;
    code_system: string | null;
    status_reason: string | null;
    status_reason_code: string | null;
    status_reason_system: string | null;
    do_not_perform: boolean | null;
    status: "active" | "on_hold" | "cancelled" | "completed" | "entered_in_error" | "stopped" | "draft" | "unknown" | null;
    intent: "proposal" | "plan" | "order" | "original-order" | "reflex-order" | "filler-order" | "instance-order" | "option" | null;
    priority: "routine" | "urgent" | "asap" | "stat" | null;
    course_of_therapy: string | null;
    course_of_therapy_code: string | null;
    course_of_therapy_system: string | null;
    category: string | null;
    categories: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    dosage_text: string | null;
    dose: number | null;
    dose_unit: string | null;
    frequency: number | null;
    period: number | null;
    period_unit: "s" | "min" | "h" | "d" | "wk" | "mo" | "a" | null;
    period_max: number | null;
    frequency_max: number | null;
    days_of_week: Array<"mon" | "tue" | "wed" | "thu" | "fri" | "sat" | "sun"> | null;
    times_of_day: Array<string> | null;
    events: Array<string> | null;
    as_needed: boolean | null;
    as_needed_reason: string | null;
    route: string | null;
    route_code: string | null;
    route_system: string | null;
    as_needed_reason_code: string | null;
    as_needed_reason_system: string | null;
    reason_code: string | null;
    reason_system: string | null;
    method: string | null;
    site: string | null;
    dose_range: string | null;
    rate: string | null;
    max_dose: string | null;
    duration: string | null;
    additional_instructions: string | null;
    patient_instruction: string | null;
    reason: string | null;
    reason_references: Array<string> | null;
    dispense_quantity: number | null;
    dispense_unit: string | null;
    refills: number | null;
    expected_supply_duration: string | null;
    substitution_allowed: boolean | null;
    substitution: string | null;
    substitution_code: string | null;
    substitution_system: string | null;
    substitution_reason: string | null;
    substitution_reason_code: string | null;
    substitution_reason_system: string | null;
    note: string | null;
    authored_at: string | null;
    reported: boolean | null;
    valid_from: string | null;
    valid_until: string | null;
    medication_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    medication_form: string | null;
    medication_form_code: string | null;
    medication_form_system: string | null;
    medication_ingredients: Array<{
        name: string | null;
        code: string | null;
        system: string | null;
        strength: string | null;
        active: boolean | null;
    }> | null;
    dosage_instructions: Array<{
        sequence: number | null;
        text: string | null;
        frequency: number | null;
        frequency_max: number | null;
        period: number | null;
        period_unit: "s" | "min" | "h" | "d" | "wk" | "mo" | "a" | null;
        period_max: number | null;
        days_of_week: Array<"mon" | "tue" | "wed" | "thu" | "fri" | "sat" | "sun"> | null;
        times_of_day: Array<string> | null;
        events: Array<string> | null;
        when: Array<string> | null;
        offset: number | null;
        count: number | null;
        duration: number | null;
        duration_unit: "s" | "min" | "h" | "d" | "wk" | "mo" | "a" | null;
        timing: string | null;
        timing_code: string | null;
        timing_system: string | null;
        timing_codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        bounds: string | null;
        as_needed_reason: string | null;
        as_needed: boolean | null;
        route: string | null;
        route_code: string | null;
        route_system: string | null;
        route_codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        as_needed_reason_code: string | null;
        as_needed_reason_system: string | null;
        method: string | null;
        site: string | null;
        dose: number | null;
        dose_unit: string | null;
        dose_low: number | null;
        dose_high: number | null;
        dose_range_unit: string | null;
        rate: string | null;
        rate_unit_code: string | null;
        max_dose_per_period: string | null;
        max_dose_per_administration: string | null;
        additional_instructions: string | null;
        patient_instruction: string | null;
        doses_and_rates: Array<{
            type: string | null;
            type_code: string | null;
            dose: string | null;
            rate: string | null;
        }> | null;
    }> | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
};
export type Procedure = {
    category_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    status_reason_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    complication_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    follow_up_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    recorded_by: string | null;
    asserted_by: string | null;
    complication_details: string | null;
    complication_references: Array<string> | null;
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    status: "preparation" | "in-progress" | "not-done" | "on-hold" | "stopped" | "completed" | "entered-in-error" | "unknown" | null;
    status_reason: string | null;
    category: string | null;
    name: string | null;
    code: string | null;
    code_system: string | null;
    codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    performed_at: string | null;
    performed_end: string | null;
    performed_text: string | null;
    performer_references: Array<string> | null;
    performer: string | null;
    performers: Array<{
        reference: string | null;
        name: string | null;
        function: string | null;
        function_code: string | null;
        function_system: string | null;
        on_behalf_of: string | null;
        on_behalf_of_reference: string | null;
    }> | null;
    location: string | null;
    location_reference: string | null;
    reason_references: Array<string> | null;
    reason: string | null;
    reason_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    body_site: string | null;
    body_site_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    outcome: string | null;
    outcome_code: string | null;
    outcome_system: string | null;
    complications: string | null;
    follow_up: string | null;
    used: string | null;
    used_code: string | null;
    used_code_system: string | null;
    used_references: Array<string> | null;
    device_references: Array<string> | null;
    focal_devices: Array<{
        action: string | null;
        action_code: string | null;
        action_system: string | null;
        device: string | null;
        device_reference: string | null;
    }> | null;
    report_references: Array<string> | null;
    based_on_references: Array<string> | null;
    note: string | null;
};
/** Why the data is wanted: an HL7 v3 ActReason code (http://terminology.hl7.org/CodeSystem/v3-ActReason). `CAREMGT`: Care management: treating the patient (ABDM "Care Management"); `BTG`: Break the glass: an emergency (ABDM "Break the Glass"); `PUBHLTH`: Public health (ABDM "Public Health"); `HPAYMT`: Healthcare payment: claims and insurance (ABDM "Healthcare Payment"); `DSRCH`: Disease-specific healthcare research (ABDM "Disease Specific Healthcare Research"); `PATRQT`: Requested by the patient, for themselves (ABDM "Self Requested") */
export type PurposeOfUse = "CAREMGT" | "BTG" | "PUBHLTH" | "HPAYMT" | "DSRCH" | "PATRQT";
export type RevokedConsents = {
    items: Array<{
        consent_id: string;
        revoked_at: string;
    }>;
};
export type RiskAssessment = {
    method_code: string | null;
    method_system: string | null;
    basis: string | null;
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    status: "registered" | "preliminary" | "final" | "amended" | "corrected" | "cancelled" | "entered-in-error" | "unknown" | null;
    assessment: string | null;
    code: string | null;
    code_system: string | null;
    method: string | null;
    occurred_at: string | null;
    occurred_end: string | null;
    condition: string | null;
    condition_reference: string | null;
    performer: string | null;
    performer_reference: string | null;
    reason: string | null;
    reason_references: Array<string> | null;
    basis_references: Array<string> | null;
    predictions: Array<{
        outcome: string | null;
        outcome_code: string | null;
        outcome_system: string | null;
        probability: number | null;
        probability_range: string | null;
        qualitative_risk: string | null;
        qualitative_risk_code: string | null;
        qualitative_risk_system: string | null;
        relative_risk: number | null;
        when: string | null;
        rationale: string | null;
    }> | null;
    mitigation: string | null;
    note: string | null;
};
export type SdkTokenIntrospection = {
    active: boolean;
    scopes: Array<string>;
    client_id: string;
    /** ISO 8601 */
    expires_at: string;
};
export type SecretRotationRequest = {
    /** How long the replaced secret stays valid beside the new one: 0 ends it at once; default 86400 (24 h), at most 30 days */
    overlap_seconds?: number;
};
/** SMART App Launch 2.x, .well-known/smart-configuration */
export type SmartConfiguration = {
    token_endpoint: string;
    token_endpoint_auth_methods_supported: Array<string>;
    token_endpoint_auth_signing_alg_values_supported: Array<string>;
    grant_types_supported: Array<string>;
    /** System scopes; any resource type may take the place of * */
    scopes_supported: Array<string>;
    capabilities: Array<string>;
    [key: string]: unknown;
};
export type Specimen = {
    id: FhirId;
    patient_id: FhirId | null;
    accession: string | null;
    status: "available" | "unavailable" | "unsatisfactory" | "entered-in-error" | null;
    type: string | null;
    type_code: string | null;
    type_system: string | null;
    received_at: string | null;
    collected_at: string | null;
    collected_end: string | null;
    collector: string | null;
    collector_reference: string | null;
    collection_method: string | null;
    collection_method_code: string | null;
    collection_method_system: string | null;
    body_site: string | null;
    body_site_code: string | null;
    body_site_system: string | null;
    quantity: number | null;
    quantity_unit: string | null;
    fasting_status: string | null;
    condition_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    condition: string | null;
    processing: string | null;
    container: string | null;
    container_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    containers: Array<{
        identifiers: Array<string> | null;
        description: string | null;
        type: string | null;
        type_codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        additive: string | null;
        additive_code: string | null;
        additive_system: string | null;
    }> | null;
    parent_references: Array<string> | null;
    request_references: Array<string> | null;
    note: string | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
};
export type Task = {
    id: FhirId;
    patient_id: FhirId | null;
    status: "draft" | "requested" | "received" | "accepted" | "rejected" | "ready" | "cancelled" | "in-progress" | "on-hold" | "failed" | "completed" | "entered-in-error" | null;
    status_reason: string | null;
    business_status: string | null;
    business_status_code: string | null;
    intent: "unknown" | "proposal" | "plan" | "order" | "original-order" | "reflex-order" | "filler-order" | "instance-order" | "option" | null;
    priority: "routine" | "urgent" | "asap" | "stat" | null;
    name: string | null;
    code: string | null;
    code_system: string | null;
    description: string | null;
    focus_reference: string | null;
    focus: string | null;
    based_on_references: Array<string> | null;
    part_of_references: Array<string> | null;
    visit_id: FhirId | null;
    execution_start: string | null;
    execution_end: string | null;
    authored_on: string | null;
    last_modified: string | null;
    requester: string | null;
    requester_reference: string | null;
    owner: string | null;
    owner_reference: string | null;
    performer_type: string | null;
    reason: string | null;
    reason_code: string | null;
    reason_system: string | null;
    reason_reference: string | null;
    note: string | null;
    inputs: Array<{
        type: string | null;
        value: string | null;
        reference: string | null;
    }> | null;
    outputs: Array<{
        type: string | null;
        value: string | null;
        reference: string | null;
    }> | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
    group_identifier: string | null;
};
/** Section 2.4. Also accepted form-encoded (SMART clients send it so), with the client credentials in HTTP Basic (RFC 6749 §2.3.1), or a client assertion (RFC 7523, SMART Backend Services). */
export type TokenRequest = {
    grant_type: "client_credentials";
    /** Integration client id (or send it with HTTP Basic); optional with a client_assertion, whose iss it must equal */
    client_id?: string;
    /** Integration client secret (or send it with HTTP Basic); clients registered with keys have none */
    client_secret?: string;
    /** SMART Backend Services (private_key_jwt): with client_assertion, instead of a secret */
    client_assertion_type?: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
    /** A JWT signed by a key of the client's registered JWK Set: alg RS384 or ES384, header kid; iss = sub = the client id; aud = this endpoint's URL; exp at most 300 s ahead; a jti never used before */
    client_assertion?: string;
    /** Space-separated scopes to narrow the grant to: Pont's own, or SMART system scopes (system/Observation.rs, system/*.cruds...; see the description); default: all of the client's scopes */
    scope?: string;
};
export type TokenResponse = {
    /** RS256-signed JWT */
    access_token: string;
    token_type: "Bearer";
    /** Seconds; 3600 */
    expires_in: number;
    /** Space-separated granted scopes */
    scope: string;
};
export type VisionPrescription = {
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    status: "active" | "cancelled" | "draft" | "entered-in-error" | null;
    date_written: string | null;
    created: string | null;
    prescriber: string | null;
    prescriber_reference: string | null;
    lenses: Array<{
        product: string | null;
        product_code: string | null;
        eye: "right" | "left" | null;
        sphere: number | null;
        cylinder: number | null;
        axis: number | null;
        add: number | null;
        prisms: Array<{
            amount: number | null;
            base: "up" | "down" | "in" | "out" | null;
        }> | null;
        power: number | null;
        back_curve: number | null;
        diameter: number | null;
        duration_value: number | null;
        duration_unit: string | null;
        color: string | null;
        brand: string | null;
        note: string | null;
    }> | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
};
export type Visit = {
    diet_preference_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    special_arrangement_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    status_history: Array<{
        status: string | null;
        start: string | null;
        end: string | null;
    }> | null;
    class_history: Array<{
        class: string | null;
        system: string | null;
        start: string | null;
        end: string | null;
    }> | null;
    id: FhirId;
    patient_id: FhirId | null;
    type: string | null;
    service_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    service: string | null;
    part_of_id: FhirId | null;
    class: string | null;
    class_coding: {
        system: string | null;
        code: string | null;
        display: string | null;
    } | null;
    status: "planned" | "arrived" | "triaged" | "in-progress" | "onleave" | "finished" | "cancelled" | "entered-in-error" | "unknown" | null;
    reason_references: Array<string> | null;
    reason: string | null;
    reason_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    reasons: Array<{
        text: string | null;
        codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
    }> | null;
    reasons_referenced: string | null;
    provider_id: FhirId | null;
    facility_id: FhirId | null;
    provider: string | null;
    participants: Array<{
        provider_id: FhirId | null;
        name: string | null;
        role: string | null;
        role_code: string | null;
        role_system: string | null;
    }> | null;
    facility: string | null;
    started_at: string | null;
    ended_at: string | null;
    note: string | null;
    priority: string | null;
    priority_code: string | null;
    priority_system: string | null;
    location: string | null;
    locations: Array<{
        location: string | null;
        location_reference: string | null;
        status: string | null;
        physical_type: string | null;
        physical_type_code: string | null;
        physical_type_system: string | null;
        start: string | null;
        end: string | null;
    }> | null;
    length: string | null;
    length_quantity: {
        value: number | null;
        unit: string | null;
        system: string | null;
        code: string | null;
    } | null;
    admit_source: string | null;
    admit_source_code: string | null;
    admit_source_system: string | null;
    discharge_disposition: string | null;
    discharge_disposition_code: string | null;
    discharge_disposition_system: string | null;
    origin: string | null;
    destination: string | null;
    participant_references: Array<string> | null;
    episode_of_care_references: Array<string> | null;
    diagnosis_ids: Array<FhirId> | null;
    diagnoses: Array<{
        condition_id: FhirId | null;
        condition_reference: string | null;
        condition: string | null;
        use: string | null;
        use_code: string | null;
        use_system: string | null;
        rank: number | null;
    }> | null;
    primary_diagnosis_id: FhirId | null;
    primary_diagnosis: string | null;
    readmission: string | null;
    special_arrangements: string | null;
    diet_preferences: string | null;
    types: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    type_concepts: Array<{
        text: string | null;
        codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
    }> | null;
    identifiers: Array<{
        system: string | null;
        value: string | null;
        type: string | null;
    }> | null;
};
export type Vital = {
    id: FhirId;
    patient_id: FhirId | null;
    visit_id: FhirId | null;
    type: string | null;
    name: string | null;
    value: number | null;
    comparator: "<" | "<=" | ">=" | ">" | null;
    systolic: number | null;
    diastolic: number | null;
    unit: string | null;
    unit_code: string | null;
    value_text: string | null;
    value_coded: string | null;
    data_absent_reason: string | null;
    data_absent_code: string | null;
    interpretation: string | null;
    reference_range: string | null;
    components: string | null;
    body_site: string | null;
    method: string | null;
    body_position: string | null;
    body_position_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    body_site_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    method_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    status: "registered" | "preliminary" | "final" | "amended" | "corrected" | "cancelled" | "entered-in-error" | "unknown" | null;
    effective_events: Array<string> | null;
    effective_timing_code: string | null;
    effective_timing_system: string | null;
    recorded_at: string | null;
    recorded_end: string | null;
    performer: string | null;
    performed_by_patient: boolean | null;
    focus: string | null;
    focus_references: Array<string> | null;
    device: string | null;
    device_reference: string | null;
    device_type: string | null;
    device_type_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    notes: Array<{
        text: string | null;
        author: string | null;
        author_string: string | null;
        author_reference: string | null;
        time: string | null;
    }> | null;
    note: string | null;
    member_ids: Array<FhirId> | null;
    derived_from_ids: Array<FhirId> | null;
    codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    categories: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    component_list: Array<{
        name: string | null;
        code: string | null;
        system: string | null;
        display: string | null;
        codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        value_numeric: number | null;
        value_integer: number | null;
        value_boolean: boolean | null;
        value_time: string | null;
        value_date_time: string | null;
        value_period: {
            start: string | null;
            end: string | null;
        } | null;
        value_range: {
            low: number | null;
            high: number | null;
            unit: string | null;
            unit_code: string | null;
        } | null;
        value_ratio: {
            numerator: number | null;
            numerator_unit: string | null;
            numerator_unit_code: string | null;
            denominator: number | null;
            denominator_unit: string | null;
            denominator_unit_code: string | null;
        } | null;
        value_precision: number | null;
        comparator: "<" | "<=" | ">=" | ">" | null;
        unit: string | null;
        unit_code: string | null;
        value: string | null;
        value_coded: string | null;
        value_code: string | null;
        value_code_system: string | null;
        value_codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        interpretations: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        data_absent_reason: string | null;
        data_absent_code: string | null;
        reference_ranges: Array<{
            low: number | null;
            high: number | null;
            unit: string | null;
            unit_code: string | null;
            text: string | null;
            type: string | null;
            type_codings: Array<{
                system: string | null;
                code: string | null;
                display: string | null;
            }> | null;
            type_text: string | null;
            applies_to: string | null;
            applies_to_concepts: Array<{
                text: string | null;
                codings: Array<{
                    system: string | null;
                    code: string | null;
                    display: string | null;
                }> | null;
            }> | null;
            age_low: number | null;
            age_high: number | null;
            age_unit: string | null;
            age_unit_code: string | null;
        }> | null;
    }> | null;
    interpretations: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
    reference_ranges: Array<{
        low: number | null;
        high: number | null;
        unit: string | null;
        unit_code: string | null;
        text: string | null;
        type: string | null;
        type_codings: Array<{
            system: string | null;
            code: string | null;
            display: string | null;
        }> | null;
        type_text: string | null;
        applies_to: string | null;
        applies_to_concepts: Array<{
            text: string | null;
            codings: Array<{
                system: string | null;
                code: string | null;
                display: string | null;
            }> | null;
        }> | null;
        age_low: number | null;
        age_high: number | null;
        age_unit: string | null;
        age_unit_code: string | null;
    }> | null;
    value_codings: Array<{
        system: string | null;
        code: string | null;
        display: string | null;
    }> | null;
};
export type WebhookDelivery = {
    /** whdlv_… */
    id: string;
    event_id: string;
    event_type: WebhookEventType;
    subscription_id: string;
    callback_url: string;
    status: "pending" | "delivered" | "exhausted" | "cancelled";
    round: number;
    /** Attempts finished in the current round */
    attempts_made: number;
    next_attempt_at: string | null;
    attempts: Array<{
        /** 1 for the original deliveries, +1 per replay */
        round: number;
        /** 1..7 within the round */
        attempt: number;
        started_at: string;
        duration_ms: number;
        /** The receiver's HTTP status, when it answered */
        status_code: number | null;
        error: string | null;
        succeeded: boolean;
        /** The first 1 KB of the receiver's answer */
        response_excerpt: string | null;
    }>;
};
export type WebhookDeliveryPage = {
    deliveries: Array<WebhookDelivery>;
    /** Pass as `cursor` for the next page */
    next_cursor: string | null;
};
export type WebhookEventDeliveries = {
    event_id: string;
    type: WebhookEventType;
    created_at: string;
    deliveries: Array<WebhookDelivery>;
};
/** Event types of section 6.1 */
export type WebhookEventType = "patient.created" | "patient.updated" | "health_id.created" | "health_id.verified" | "consent.requested" | "consent.granted" | "consent.denied" | "consent.revoked" | "consent.expired" | "consent.erase_due" | "encounter.created" | "encounter.closed" | "lab_order.created" | "lab_result.released" | "lab_result.amended" | "prescription.issued" | "prescription.cancelled" | "prescription.dispensed" | "appointment.created" | "appointment.checked_in" | "appointment.cancelled" | "document.issued" | "document.verified" | "bridge_agent.sync_failed";
export type WebhookReplay = {
    event_id: string;
    deliveries: Array<{
        id: string;
        subscription_id: string;
        round: number;
    }>;
};
export type WebhookSecretRotation = {
    /** whsub_… */
    id: string;
    callback_url: string;
    subscribed_events: Array<WebhookEventType>;
    description: string;
    status: "active";
    /** Deliveries carry the full event data (operator switch); otherwise identifiers only */
    full_payload: boolean;
    created_at: string;
    /** whsec_…: the new secret, shown in this response only */
    webhook_secret: string;
    /** Until when deliveries are also signed with the replaced secret (ISO 8601); null: they no longer are */
    previous_secret_expires_at: string | null;
};
export type WebhookSubscription = {
    /** whsub_… */
    id: string;
    callback_url: string;
    subscribed_events: Array<WebhookEventType>;
    description: string;
    status: "active";
    /** Deliveries carry the full event data (operator switch); otherwise identifiers only */
    full_payload: boolean;
    created_at: string;
};
export type WebhookSubscriptionCreate = {
    /** HTTPS URL that receives the deliveries */
    callback_url: string;
    /** Event types to receive */
    subscribed_events: Array<WebhookEventType>;
    description?: string;
};
export type WebhookSubscriptionCreated = {
    /** whsub_… */
    id: string;
    callback_url: string;
    subscribed_events: Array<WebhookEventType>;
    description: string;
    status: "active";
    /** Deliveries carry the full event data (operator switch); otherwise identifiers only */
    full_payload: boolean;
    created_at: string;
    /** whsec_…: shown in this response only. Verifies X-Service-Signature. */
    webhook_secret: string;
};
