<?php

declare(strict_types=1);

namespace Pont;

/**
 * FHIR R4 (/api/fhir/R4, and the SDK's per-patient helpers). Searches and histories (#[Paged]) answer the first
 * Bundle as a plain array; autoPagingIterator('search', …) yields the resources of every page and pages('search', …)
 * every Bundle, one page fetched at a time (see Paging). Writes on /api/fhir/R4 are not deduplicated by an
 * Idempotency-Key: they are retried only when the caller passes 'idempotency_key' (safe for delete, which is
 * idempotent by itself).
 *
 * @phpstan-type Resource array{resourceType: string, id?: string, meta?: array{versionId?: string, lastUpdated?: string}}
 * @phpstan-type Bundle array{resourceType: 'Bundle', type: string, total?: int, link?: list<array{relation: string, url: string}>, entry?: list<array{resource?: Resource, search?: array{mode?: string}}>}
 * @phpstan-import-type RequestOptions from Transport
 */
final class Fhir extends Module
{
    use Paging;

    private const BASE = '/api/fhir/R4';

    /** @param array<string, mixed> $filters @param RequestOptions $options @return Bundle */
    #[Paged]
    public function medicationRequests(string $healthId, array $filters = [], array $options = []): array
    {
        return $this->perPatient('MedicationRequest', $healthId, $filters, $options);
    }

    /** @param array<string, mixed> $filters @param RequestOptions $options @return Bundle */
    #[Paged]
    public function allergyIntolerances(string $healthId, array $filters = [], array $options = []): array
    {
        return $this->perPatient('AllergyIntolerance', $healthId, $filters, $options);
    }

    /** @param array<string, mixed> $filters @param RequestOptions $options @return Bundle */
    #[Paged]
    public function diagnosticReports(string $healthId, array $filters = [], array $options = []): array
    {
        return $this->perPatient('DiagnosticReport', $healthId, $filters, $options);
    }

    /** @param array<string, mixed> $filters @param RequestOptions $options @return Bundle */
    #[Paged]
    public function conditions(string $healthId, array $filters = [], array $options = []): array
    {
        return $this->perPatient('Condition', $healthId, $filters, $options);
    }

    /** $everything of a patient named by Health ID (SDK). @param array<string, mixed> $params @param RequestOptions $options @return Bundle */
    #[Paged]
    public function patientEverything(string $healthId, array $params = [], array $options = []): array
    {
        self::required('fhir->patientEverything', ['healthId' => $healthId]);
        return $this->searchPath('/api/v1/sdk/patients/' . self::segment($healthId) . '/fhir/$everything', $params, $options);
    }

    /** Patient/{id}/$everything. @param array<string, mixed> $params @param RequestOptions $options @return Bundle */
    #[Paged]
    public function everything(string $patientId, array $params = [], array $options = []): array
    {
        self::required('fhir->everything', ['patientId' => $patientId]);
        return $this->searchPath(self::BASE . '/Patient/' . self::segment($patientId) . '/$everything', $params, $options);
    }

    /** A search on /api/fhir/R4/{type} (a list value repeats the parameter). @param array<string, mixed> $params @param RequestOptions $options @return Bundle */
    #[Paged]
    public function search(string $resourceType, array $params = [], array $options = []): array
    {
        self::required('fhir->search', ['resourceType' => $resourceType]);
        return $this->searchPath(self::BASE . '/' . self::segment($resourceType), $params, $options);
    }

    /** The same search sent as a form (POST _search): parameters stay out of URLs and logs. @param array<string, mixed> $params @param RequestOptions $options @return Bundle */
    #[Paged]
    public function searchPost(string $resourceType, array $params = [], array $options = []): array
    {
        self::required('fhir->searchPost', ['resourceType' => $resourceType]);
        $form = (string) parse_url($this->http->url('', $params), PHP_URL_QUERY);
        return $this->listed($this->bundleList(fn (): array => $this->http->request('POST', self::BASE . '/' . self::segment($resourceType) . '/_search', options: $options,
            accept: 'application/fhir+json', contentType: 'application/x-www-form-urlencoded', repeatable: true, rawBody: $form), $options));
    }

    /** Patient/{id}/{type}: the patient's resources of one type. @param array<string, mixed> $params @param RequestOptions $options @return Bundle */
    #[Paged]
    public function searchCompartment(string $patientId, string $resourceType, array $params = [], array $options = []): array
    {
        self::required('fhir->searchCompartment', ['patientId' => $patientId, 'resourceType' => $resourceType]);
        return $this->searchPath(self::BASE . '/Patient/' . self::segment($patientId) . '/' . self::segment($resourceType), $params, $options);
    }

    /** @param RequestOptions $options @return Resource */
    public function read(string $resourceType, string $id, array $options = []): array
    {
        self::required('fhir->read', ['resourceType' => $resourceType, 'id' => $id]);
        return $this->fhir('GET', self::BASE . '/' . self::segment($resourceType) . '/' . self::segment($id), options: $options);
    }

    /** @param RequestOptions $options @return Resource */
    public function vread(string $resourceType, string $id, string $versionId, array $options = []): array
    {
        self::required('fhir->vread', ['resourceType' => $resourceType, 'id' => $id, 'versionId' => $versionId]);
        return $this->fhir('GET', self::BASE . '/' . self::segment($resourceType) . '/' . self::segment($id) . '/_history/' . self::segment($versionId), options: $options);
    }

    /** Versions of one resource (with $id) or of a type, newest first. @param array<string, mixed> $params @param RequestOptions $options @return Bundle */
    #[Paged]
    public function history(string $resourceType, ?string $id = null, array $params = [], array $options = []): array
    {
        self::required('fhir->history', ['resourceType' => $resourceType]);
        return $this->searchPath(self::BASE . '/' . self::segment($resourceType) . ($id === null ? '' : '/' . self::segment($id)) . '/_history', $params, $options);
    }

    /**
     * Creates $resource; with $ifNoneExist (search criteria) only when none matches.
     *
     * @param Resource $resource
     * @param RequestOptions $options
     * @return Resource
     */
    public function create(array $resource, ?string $ifNoneExist = null, array $options = []): array
    {
        self::required('fhir->create', ['resourceType' => $resource['resourceType'] ?? null]);
        return $this->fhir('POST', self::BASE . '/' . self::segment($resource['resourceType']), body: $resource, options: $options, headers: ['If-None-Exist' => $ifNoneExist]);
    }

    /**
     * Replaces (or creates) the resource under its id; $ifMatch (an ETag, W/"3") refuses it when the version changed.
     *
     * @param Resource $resource
     * @param RequestOptions $options
     * @return Resource
     */
    public function update(array $resource, ?string $ifMatch = null, array $options = []): array
    {
        self::required('fhir->update', ['resourceType' => $resource['resourceType'] ?? null, 'id' => $resource['id'] ?? null]);
        return $this->fhir('PUT', self::BASE . '/' . self::segment($resource['resourceType']) . '/' . self::segment($resource['id']), body: $resource, options: $options, headers: ['If-Match' => $ifMatch]);
    }

    /**
     * PUT /{type}?criteria: updates the one match, or creates when none matches (412 when several do).
     *
     * @param Resource $resource
     * @param array<string, mixed> $criteria
     * @param RequestOptions $options
     * @return Resource
     */
    public function conditionalUpdate(array $resource, array $criteria, array $options = []): array
    {
        self::required('fhir->conditionalUpdate', ['resourceType' => $resource['resourceType'] ?? null, 'criteria' => $criteria]);
        return $this->fhir('PUT', self::BASE . '/' . self::segment($resource['resourceType']), $criteria, $resource, $options);
    }

    /**
     * A JSON Patch (RFC 6902).
     *
     * @param list<array{op: string, path: string, value?: mixed, from?: string}> $operations
     * @param RequestOptions $options
     * @return Resource
     */
    public function patch(string $resourceType, string $id, array $operations, ?string $ifMatch = null, array $options = []): array
    {
        self::required('fhir->patch', ['resourceType' => $resourceType, 'id' => $id, 'operations' => $operations]);
        return $this->fhir('PATCH', self::BASE . '/' . self::segment($resourceType) . '/' . self::segment($id), body: array_values($operations), options: $options,
            headers: ['If-Match' => $ifMatch], contentType: 'application/json-patch+json');
    }

    /**
     * PATCH /{type}?params: a JSON Patch of the one resource the search matches (412 when several do).
     *
     * @param array<string, mixed> $params
     * @param list<array{op: string, path: string, value?: mixed, from?: string}> $operations
     * @param RequestOptions $options
     * @return Resource
     */
    public function conditionalPatch(string $resourceType, array $params, array $operations, array $options = []): array
    {
        self::required('fhir->conditionalPatch', ['resourceType' => $resourceType, 'params' => $params, 'operations' => $operations]);
        return $this->fhir('PATCH', self::BASE . '/' . self::segment($resourceType), $params, array_values($operations), $options, contentType: 'application/json-patch+json');
    }

    /**
     * $validate: the OperationOutcome of the server's checks, nothing stored. Without $id, as a new resource; with $id,
     * against the stored one ($mode update, the default, or delete). No effect: retried like a GET.
     *
     * @param Resource $resource
     * @param RequestOptions $options
     * @return array<string, mixed>
     */
    public function validate(array $resource, ?string $id = null, ?string $mode = null, array $options = []): array
    {
        self::required('fhir->validate', ['resourceType' => $resource['resourceType'] ?? null]);
        $path = self::BASE . '/' . self::segment($resource['resourceType']) . ($id === null ? '' : '/' . self::segment($id)) . '/$validate';
        return $this->fhir('POST', $path, ['mode' => $mode], $resource, $options, repeatable: true);
    }

    /**
     * Deletes (history is kept). Not retried after a lost answer unless 'idempotency_key' is given.
     *
     * @param RequestOptions $options
     */
    public function delete(string $resourceType, string $id, ?string $ifMatch = null, array $options = []): void
    {
        self::required('fhir->delete', ['resourceType' => $resourceType, 'id' => $id]);
        $this->fhir('DELETE', self::BASE . '/' . self::segment($resourceType) . '/' . self::segment($id), options: $options, headers: ['If-Match' => $ifMatch]);
    }

    /**
     * DELETE /{type}?params: deletes the one resource the search matches (none: nothing deleted; several: 412).
     *
     * @param array<string, mixed> $params
     * @param RequestOptions $options
     */
    public function conditionalDelete(string $resourceType, array $params, array $options = []): void
    {
        self::required('fhir->conditionalDelete', ['resourceType' => $resourceType, 'params' => $params]);
        $this->fhir('DELETE', self::BASE . '/' . self::segment($resourceType), $params, options: $options);
    }

    /**
     * A transaction (all or nothing) or batch Bundle.
     *
     * @param array{resourceType: 'Bundle', type: 'transaction'|'batch', entry: list<array<string, mixed>>} $bundle
     * @param RequestOptions $options
     * @return array<string, mixed>
     */
    public function transaction(array $bundle, array $options = []): array
    {
        self::required('fhir->transaction', ['bundle' => $bundle]);
        return $this->fhir('POST', self::BASE, body: $bundle, options: $options);
    }

    /** The CapabilityStatement (GET /metadata). @param RequestOptions $options @return array<string, mixed> */
    public function capabilities(array $options = []): array
    {
        return $this->fhir('GET', self::BASE . '/metadata', options: $options);
    }

    /**
     * @param array<string, mixed> $query
     * @param RequestOptions $options
     * @param array<string, ?string> $headers
     */
    private function fhir(string $method, string $path, array $query = [], mixed $body = null, array $options = [], array $headers = [],
        string $contentType = 'application/fhir+json', ?bool $repeatable = null): mixed
    {
        $headers = array_filter($headers, static fn ($v) => $v !== null);
        if ($headers !== []) {
            $options['headers'] = ($options['headers'] ?? []) + $headers;
        }
        return $this->http->request($method, $path, $query, $body, options: $options, accept: 'application/fhir+json', contentType: $contentType, repeatable: $repeatable);
    }

    /** @param array<string, mixed> $params @param RequestOptions $options @return Bundle */
    private function searchPath(string $path, array $params, array $options): array
    {
        return $this->listed($this->bundleList(fn (): array => $this->fhir('GET', $path, $params, options: $options), $options));
    }

    /** @param array<string, mixed> $filters @param RequestOptions $options @return Bundle */
    private function perPatient(string $type, string $healthId, array $filters, array $options): array
    {
        self::required("fhir->$type", ['healthId' => $healthId]);
        return $this->searchPath('/api/v1/sdk/patients/' . self::segment($healthId) . "/fhir/$type", $filters, $options);
    }
}
