<?php

declare(strict_types=1);

namespace Pont;

/**
 * Pont's official PHP client (interface section 4.7):
 * $pont = new \Pont\Pont(clientId: '…', clientSecret: '…', environment: 'sandbox');
 * $pont->healthIds->resolve(['first_name' => 'Ama', …]);
 * The token is fetched here (AuthenticationError on bad credentials) and refreshed 60 s before expiry.
 */
final class Pont
{
    public const ENVIRONMENTS = ['sandbox' => 'https://sandbox.pont.health', 'production' => 'https://api.pont.health'];

    public readonly Auth $auth;
    public readonly HealthIds $healthIds;
    public readonly Patients $patients;
    public readonly Consents $consents;
    public readonly Records $records;
    public readonly Fhir $fhir;
    public readonly WebhookSubscriptions $webhooks;
    public readonly Inventory $inventory;
    public readonly Payments $payments;
    private readonly Transport $http;

    /** @param null|callable $sender for tests: (method, url, headers, body, timeout) -> [status, headers, body] */
    public function __construct(
        string $clientId,
        #[\SensitiveParameter] string $clientSecret,
        string $environment = 'sandbox',
        ?string $baseUrl = null,
        int $maxRetries = 3,
        float $timeout = 30.0,
        float $backoff = 0.5,
        ?callable $sender = null,
    ) {
        if ($clientId === '' || $clientSecret === '') {
            throw new ValidationError('Pont: clientId and clientSecret are required');
        }
        if ($baseUrl === null && !isset(self::ENVIRONMENTS[$environment])) {
            throw new ValidationError('Pont: environment must be sandbox or production');
        }
        $this->http = new Transport($clientId, $clientSecret, rtrim($baseUrl ?? self::ENVIRONMENTS[$environment], '/'), $maxRetries, $timeout, $backoff, $sender);
        $this->http->accessToken();
        $this->auth = new Auth($this->http);
        $this->healthIds = new HealthIds($this->http);
        $this->patients = new Patients($this->http);
        $this->consents = new Consents($this->http);
        $this->records = new Records($this->http);
        $this->fhir = new Fhir($this->http);
        $this->webhooks = new WebhookSubscriptions($this->http);
        $this->inventory = new Inventory($this->http);
        $this->payments = new Payments($this->http);
    }

    /** @return array<string, string> never the secret or the token */
    public function __debugInfo(): array
    {
        return ['baseUrl' => $this->http->baseUrl];
    }
}
