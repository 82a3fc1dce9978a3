<?php

declare(strict_types=1);

namespace Pont;

final class HealthIds extends Module
{
    /**
     * Finds the patient by health_id, or by first_name, last_name, date_of_birth (creating them when none matches).
     *
     * @param array<string, mixed> $fields
     * @return array<string, mixed>
     */
    public function resolve(array $fields): array
    {
        self::required('healthIds->resolve', ['fields' => $fields]);
        if (($fields['health_id'] ?? null) === null) {
            self::required('healthIds->resolve', ['first_name' => $fields['first_name'] ?? null]);
        }
        return $this->postJson('/api/v1/connect/patients/resolve', $fields);
    }

    /** @return array<string, mixed> */
    public function verify(string $healthId): array
    {
        self::required('healthIds->verify', ['healthId' => $healthId]);
        return $this->getJson('/api/v1/connect/patients/verify/' . self::segment($healthId));
    }
}
