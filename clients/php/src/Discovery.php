<?php

declare(strict_types=1);

namespace Pont;

/**
 * Discovery documents: public, sent without a token (none is fetched for them).
 *
 * @phpstan-import-type Jwks from Types
 * @phpstan-import-type OAuthServerMetadata from Types
 * @phpstan-import-type SmartConfiguration from Types
 * @phpstan-import-type RequestOptions from Transport
 */
final class Discovery extends Module
{
    /**
     * SMART App Launch configuration (/.well-known/smart-configuration): how SMART Backend Services authenticate.
     *
     * @param RequestOptions $options
     * @return SmartConfiguration
     */
    public function smartConfiguration(array $options = []): array
    {
        return $this->http->request('GET', '/.well-known/smart-configuration', options: $options, auth: false);
    }

    /**
     * The same SMART configuration, under the FHIR base (/api/fhir/R4/.well-known/smart-configuration).
     *
     * @param RequestOptions $options
     * @return SmartConfiguration
     */
    public function fhirSmartConfiguration(array $options = []): array
    {
        return $this->http->request('GET', '/api/fhir/R4/.well-known/smart-configuration', options: $options, auth: false);
    }

    /**
     * OAuth 2.0 authorization server metadata (RFC 8414).
     *
     * @param RequestOptions $options
     * @return OAuthServerMetadata
     */
    public function oauthServerMetadata(array $options = []): array
    {
        return $this->http->request('GET', '/.well-known/oauth-authorization-server', options: $options, auth: false);
    }

    /**
     * The public keys that verify Pont's access tokens (RS256).
     *
     * @param RequestOptions $options
     * @return Jwks
     */
    public function jwks(array $options = []): array
    {
        return $this->http->request('GET', '/.well-known/jwks.json', options: $options, auth: false);
    }

    /**
     * The server's OpenAPI 3.1 document.
     *
     * @param RequestOptions $options
     * @return array<string, mixed>
     */
    public function openapi(array $options = []): array
    {
        return $this->http->request('GET', '/api/openapi.json', options: $options, auth: false);
    }
}
