<?php

declare(strict_types=1);

namespace Pont;

/** FHIR searches answer one Bundle holding every page (next links followed). */
final class Fhir extends Module
{
    /** @param array<string, mixed> $filters @return array<string, mixed> */
    public function medicationRequests(string $healthId, array $filters = []): array
    {
        return $this->perPatient('MedicationRequest', $healthId, $filters);
    }

    /** @param array<string, mixed> $filters @return array<string, mixed> */
    public function allergyIntolerances(string $healthId, array $filters = []): array
    {
        return $this->perPatient('AllergyIntolerance', $healthId, $filters);
    }

    /** @param array<string, mixed> $filters @return array<string, mixed> */
    public function diagnosticReports(string $healthId, array $filters = []): array
    {
        return $this->perPatient('DiagnosticReport', $healthId, $filters);
    }

    /** @param array<string, mixed> $filters @return array<string, mixed> */
    public function conditions(string $healthId, array $filters = []): array
    {
        return $this->perPatient('Condition', $healthId, $filters);
    }

    /** @param array<string, mixed> $params @return array<string, mixed> */
    public function patientEverything(string $healthId, array $params = []): array
    {
        self::required('fhir->patientEverything', ['healthId' => $healthId]);
        return $this->allPages('/api/v1/sdk/patients/' . self::segment($healthId) . '/fhir/$everything', $params);
    }

    /** A FHIR search on /api/fhir/R4, every page. @param array<string, mixed> $params @return array<string, mixed> */
    public function search(string $resourceType, array $params = []): array
    {
        self::required('fhir->search', ['resourceType' => $resourceType]);
        return $this->allPages('/api/fhir/R4/' . self::segment($resourceType), $params);
    }

    /** @return array<string, mixed> */
    public function read(string $resourceType, string $id): array
    {
        self::required('fhir->read', ['resourceType' => $resourceType, 'id' => $id]);
        return $this->getJson('/api/fhir/R4/' . self::segment($resourceType) . '/' . self::segment($id));
    }

    /** @param array<string, mixed> $filters @return array<string, mixed> */
    private function perPatient(string $type, string $healthId, array $filters): array
    {
        self::required("fhir->$type", ['healthId' => $healthId]);
        return $this->allPages('/api/v1/sdk/patients/' . self::segment($healthId) . "/fhir/$type", $filters);
    }

    /** @param array<string, mixed> $query @return array<string, mixed> */
    private function allPages(string $path, array $query): array
    {
        $first = $this->getJson($path, $query);
        $entries = $first['entry'] ?? [];
        $next = self::nextLink($first);
        while ($next !== null) {
            $page = $this->http->request('GET', '', [], null, false, $next);
            array_push($entries, ...($page['entry'] ?? []));
            $next = self::nextLink($page);
        }
        $first['link'] = array_values(array_filter($first['link'] ?? [], static fn ($l) => ($l['relation'] ?? '') !== 'next'));
        $first['entry'] = $entries;
        return $first;
    }

    /** @param array<string, mixed> $bundle */
    private static function nextLink(array $bundle): ?string
    {
        foreach ($bundle['link'] ?? [] as $link) {
            if (($link['relation'] ?? '') === 'next') {
                return $link['url'];
            }
        }
        return null;
    }
}
