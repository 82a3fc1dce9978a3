<?php

declare(strict_types=1);

namespace Pont;

/** What an answer was: its status (null when none came), lower-cased headers and request id (X-Request-ID). */
final class Response
{
    public readonly ?string $requestId;

    /** @param array<string, string> $headers */
    public function __construct(public readonly ?int $status, public readonly array $headers)
    {
        $this->requestId = $headers['x-request-id'] ?? null;
    }
}
