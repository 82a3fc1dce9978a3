<?php

declare(strict_types=1);

namespace Pont;

/**
 * The client's own credentials and tokens.
 *
 * @phpstan-import-type ClientSecretRotation from Types
 * @phpstan-import-type IntrospectionResponse from Types
 * @phpstan-import-type SdkTokenIntrospection from Types
 * @phpstan-import-type TokenResponse from Types
 * @phpstan-import-type RequestOptions from Transport
 */
final class Auth extends Module
{
    public function __construct(Transport $http, private readonly ClientCredentials $credentials)
    {
        parent::__construct($http);
    }

    /**
     * A new access token (the client fetches and refreshes its own: this is for handing one to another process).
     *
     * @param RequestOptions $options
     * @return TokenResponse
     */
    public function token(?string $scope = null, array $options = []): array
    {
        return $this->http->request('POST', '/api/v1/connect/auth/token', body: $this->credentials->tokenRequest($scope), options: $options, auth: false, repeatable: true);
    }

    /**
     * RFC 7662 introspection of a token, as this client.
     *
     * @param RequestOptions $options
     * @return IntrospectionResponse
     */
    public function introspect(string $token, array $options = []): array
    {
        self::required('auth->introspect', ['token' => $token]);
        return $this->http->request('POST', '/api/v1/connect/auth/introspect', body: ['token' => $token], options: $options, repeatable: true);
    }

    /**
     * What the server knows of this client's current token (scopes, organisation, expiry).
     *
     * @param RequestOptions $options
     * @return SdkTokenIntrospection
     */
    public function introspectCurrent(array $options = []): array
    {
        return $this->getJson('/api/v1/sdk/token/introspect', [], $options);
    }

    /**
     * Replaces this client's secret: the answer's client_secret is shown only this once, and this instance asks for
     * its next tokens with it. The old secret stays valid for $overlapSeconds (server default 86400; 0: none).
     *
     * @param RequestOptions $options
     * @return ClientSecretRotation
     */
    public function rotateClientSecret(?int $overlapSeconds = null, array $options = []): array
    {
        $rotated = $this->postJson('/api/v1/connect/auth/clients/' . self::segment($this->credentials->clientId) . '/rotate-secret', self::overlap($overlapSeconds), $options);
        $this->credentials->useSecret($rotated['client_secret']);
        return $rotated;
    }
}
