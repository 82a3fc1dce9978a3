<?php

declare(strict_types=1);

namespace Pont;

/**
 * @phpstan-import-type PaymentReconciliationDay from Types
 * @phpstan-import-type RequestOptions from Transport
 */
final class Payments extends Module
{
    /**
     * The day's payments (date YYYY-MM-DD) with totals and the ones that do not reconcile.
     *
     * @param array{facility_id?: string, time_zone?: string} $query
     * @param RequestOptions $options
     * @return PaymentReconciliationDay
     */
    public function reconciliation(string $date, array $query = [], array $options = []): array
    {
        self::required('payments->reconciliation', ['date' => $date]);
        return $this->getJson('/api/v1/connect/payments/reconciliation', ['date' => $date] + $query, $options);
    }
}
