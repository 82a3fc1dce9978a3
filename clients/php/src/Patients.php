<?php

declare(strict_types=1);

namespace Pont;

final class Patients extends Module
{
    /** @return array<string, mixed> */
    public function getSummary(string $healthId): array
    {
        self::required('patients->getSummary', ['healthId' => $healthId]);
        return $this->getJson('/api/v1/sdk/patients/' . self::segment($healthId) . '/summary');
    }

    /** @return array<string, mixed> */
    public function search(string $healthId): array
    {
        self::required('patients->search', ['healthId' => $healthId]);
        return $this->getJson('/api/v1/connect/patient/search', ['health_id' => $healthId]);
    }
}
