<?php

declare(strict_types=1);

namespace Pont;

/**
 * Probes: public, sent without a token.
 *
 * @phpstan-type Health array{status: 'ok'|'unavailable', checks?: array<string, string>, mappings_version?: string}
 * @phpstan-import-type RequestOptions from Transport
 */
final class System extends Module
{
    /**
     * Liveness: ['status' => 'ok'] while the process is up.
     *
     * @param RequestOptions $options
     * @return Health
     */
    public function healthz(array $options = []): array
    {
        return $this->http->request('GET', '/healthz', options: $options, auth: false);
    }

    /**
     * Readiness: status 'ok' once the database answers. Not ready is a 503, retried like any GET, then a ServerError
     * (its body is the answer): pass ['max_retries' => 0] for a probe.
     *
     * @param RequestOptions $options
     * @return Health
     */
    public function readyz(array $options = []): array
    {
        return $this->http->request('GET', '/readyz', options: $options, auth: false);
    }
}
