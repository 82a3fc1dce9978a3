<?php

declare(strict_types=1);

namespace Pont;

/** The client's own credentials. */
final class Auth extends Module
{
    /**
     * Replaces this client's secret: the answer's client_secret is shown only this once, and this instance asks for
     * its next tokens with it. The old secret stays valid for $overlapSeconds (server default 86400; 0: none).
     *
     * @return array<string, mixed>
     */
    public function rotateClientSecret(?int $overlapSeconds = null): array
    {
        $rotated = $this->postJson('/api/v1/connect/auth/clients/' . self::segment($this->http->clientId()) . '/rotate-secret', self::overlap($overlapSeconds));
        $this->http->useClientSecret($rotated['client_secret']);
        return $rotated;
    }
}
