import { beforeAll, describe, expect, it } from 'vitest';
import { loadFhirDefinitions } from './fhir-definitions';
import { referencedType, referenceFormProblem } from './reference-form';

beforeAll(() => {
  loadFhirDefinitions();
});

describe('the form of a Reference.reference (referenceFormProblem)', () => {
  it.each([
    'Patient/123',
    'Patient/a-b.C9',
    `Patient/${'a'.repeat(64)}`,
    'Observation/1/_history/2',
    'https://other.example/fhir/Patient/123',
    'http://hl7.org/fhir/Questionnaire/x|1.0',
    'urn:uuid:5a7c0e0c-2c5f-4d2e-9b59-8c1b5ad0e0a1',
    'urn:oid:1.2.36.146.595.217.0.1',
    'Patient?identifier=http://hospital.example/mrn|123',
    // A writer's criteria as it wrote them (an MRN with a space): the transaction's search decides, not its form.
    'Patient?identifier=urn:oid:1.2.3|MRN 123',
    '#med1',
    '#',
  ])('%s has a form', (reference) => expect(referenceFormProblem(reference)).toBeUndefined());

  it.each<[string, RegExp]>([
    ['', /"" is not a reference/],
    ['xxxx', /"xxxx" is not a reference/],
    ['Mrs Jones, bed 4', /is not a reference.*display/],
    ['Patient/', /not a reference/],
    ['Patient/a b', /not a reference/],
    ['Patient/a_b', /not a reference/],
    [`Patient/${'a'.repeat(65)}`, /not a reference/],
    ['Patient/1/_history/', /not a reference/],
    ['#a b', /not a reference/],
    ['fhir/Patient/1', /not a reference/],
    ['/Patient/1', /not a reference/],
    ['https://other.example/Patient/1 2', /not a reference/],
    ['Pateint/1', /^Pateint is not a resource type of FHIR R4$/],
    ['patient/1', /^patient is not a resource type/],
    ['Patinet?identifier=1', /^Patinet is not a resource type/],
    // Another scheme is no reference: nothing resolves it, and a reader's link to it could run a script.
    ['javascript:alert(document.cookie)', /not a reference/],
    ['data:text/html,<script>alert(1)</script>', /not a reference/],
    ['MRN:12345', /not a reference/],
    ['Patient:123', /not a reference/],
    ['http://', /not a reference/],
    ['https://other.example/Patient/1\u0001', /not a reference/],
    // A conditional reference is a search's parameters, not words after a question mark.
    ['Patient?Mrs Jones, bed 4', /not a reference/],
    ['Patient?', /not a reference/],
    ['Patient?name=a\nb', /not a reference/],
  ])('%j has none', (reference, problem) => expect(referenceFormProblem(reference)).toMatch(problem));

  it('the type a reference names by its form: relative, versioned, or a RESTful URL on any server', () => {
    expect(referencedType('Organization/1')).toBe('Organization');
    expect(referencedType('Organization/1/_history/2')).toBe('Organization');
    expect(referencedType('https://other.example/fhir/Organization/1')).toBe('Organization');
    expect(referencedType('http://localhost:8080/api/fhir/R4/Organization/1/_history/3')).toBe('Organization');
    for (const none of ['urn:oid:1.2.3', '#p1', 'https://other.example/fhir/Widget/1', 'https://other.example/fhir/Organization', 'Patient?identifier=1', 'words']) expect(referencedType(none)).toBeUndefined();
  });

  it('shows at most 100 characters of a long one, and its length', () => {
    const problem = referenceFormProblem('x'.repeat(100_000))!;
    expect(problem.length).toBeLessThan(400);
    expect(problem).toContain('(100000 characters)');
  });
});
