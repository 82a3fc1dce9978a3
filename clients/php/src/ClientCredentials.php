<?php

declare(strict_types=1);

namespace Pont;

/** Tokens of a client (OAuth client credentials): fetched on first use, cached, refreshed 60 s before expiry and after a 401. */
final class ClientCredentials
{
    public const REFRESH_BEFORE_SECONDS = 60;

    private ?string $token = null;
    private float $expiresAt = 0.0;

    public function __construct(
        private readonly Transport $http,
        public readonly string $clientId,
        #[\SensitiveParameter] private string $clientSecret,
    ) {
    }

    /** After a rotation of the client's secret: later tokens are asked for with the new one. */
    public function useSecret(#[\SensitiveParameter] string $secret): void
    {
        $this->clientSecret = $secret;
        $this->token = null;
    }

    /** @return array<string, mixed> the token request's body */
    public function tokenRequest(?string $scope = null): array
    {
        return ['grant_type' => 'client_credentials', 'client_id' => $this->clientId, 'client_secret' => $this->clientSecret] + ($scope === null ? [] : ['scope' => $scope]);
    }

    /** @return array<string, string> */
    public function __invoke(bool $force): array
    {
        if ($force || $this->token === null || microtime(true) >= $this->expiresAt - self::REFRESH_BEFORE_SECONDS) {
            $answer = $this->http->request('POST', '/api/v1/connect/auth/token', body: $this->tokenRequest(), auth: false, repeatable: true);
            if (!is_array($answer) || !is_string($answer['access_token'] ?? null)) {
                throw new AuthenticationError('The token endpoint answered without an access_token');
            }
            $this->token = $answer['access_token'];
            $this->expiresAt = microtime(true) + (float) ($answer['expires_in'] ?? 3600);
        }
        return ['Authorization' => 'Bearer ' . $this->token];
    }

    /** @return array<string, string> never the secret or the token */
    public function __debugInfo(): array
    {
        return ['clientId' => $this->clientId];
    }
}
