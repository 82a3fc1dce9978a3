<?php

declare(strict_types=1);

namespace Pont;

/**
 * Pont's official PHP client (interface section 4.7):
 * $pont = new \Pont\Pont(clientId: '…', clientSecret: '…', environment: 'sandbox');
 * $pont->healthIds->resolve(['first_name' => 'Ama', …]);
 *
 * The constructor makes no request: the first call fetches a token (AuthenticationError on bad credentials), which
 * is refreshed 60 s before expiry. Settings are every call's defaults (each call may override them with its options
 * array): maxRetries (3), timeout (30 s per attempt), connectTimeout (10 s), deadline (120 s per call), backoff
 * (0.5 s), maxBackoff (8 s); onRequest/onResponse are hooks for logging; sender, sleep, clock, random are for tests.
 */
final class Pont
{
    public const ENVIRONMENTS = ['sandbox' => 'https://sandbox.pont.health', 'production' => 'https://api.pont.health'];
    public const VERSION = Transport::VERSION;

    public readonly Auth $auth;
    public readonly HealthIds $healthIds;
    public readonly Patients $patients;
    public readonly Consents $consents;
    public readonly Records $records;
    public readonly Fhir $fhir;
    public readonly WebhookSubscriptions $webhooks;
    public readonly Inventory $inventory;
    public readonly Payments $payments;
    public readonly Bulk $bulk;
    public readonly Discovery $discovery;
    public readonly System $system;
    public readonly Demo $demo;
    private readonly Transport $http;

    public function __construct(
        string $clientId,
        #[\SensitiveParameter] string $clientSecret,
        string $environment = 'sandbox',
        ?string $baseUrl = null,
        int $maxRetries = 3,
        float $timeout = 30.0,
        float $connectTimeout = 10.0,
        float $deadline = 120.0,
        float $backoff = 0.5,
        float $maxBackoff = 8.0,
        ?callable $sender = null,
        ?callable $sleep = null,
        ?callable $clock = null,
        ?callable $random = null,
        ?callable $onRequest = null,
        ?callable $onResponse = null,
    ) {
        if ($clientId === '' || $clientSecret === '') {
            throw new ValidationError('Pont: clientId and clientSecret are required');
        }
        $this->http = new Transport(self::baseUrlOf($environment, $baseUrl), $maxRetries, $timeout, $connectTimeout, $deadline, $backoff, $maxBackoff,
            $sender, $sleep, $clock, $random, null, $onRequest, $onResponse);
        $credentials = new ClientCredentials($this->http, $clientId, $clientSecret);
        $this->http->credentials = $credentials;
        $this->auth = new Auth($this->http, $credentials);
        $this->healthIds = new HealthIds($this->http);
        $this->patients = new Patients($this->http);
        $this->consents = new Consents($this->http);
        $this->records = new Records($this->http);
        $this->fhir = new Fhir($this->http);
        $this->webhooks = new WebhookSubscriptions($this->http);
        $this->inventory = new Inventory($this->http);
        $this->payments = new Payments($this->http);
        $this->bulk = new Bulk($this->http);
        $this->discovery = new Discovery($this->http);
        $this->system = new System($this->http);
        $this->demo = new Demo($this->http);
    }

    /** @internal */
    public static function baseUrlOf(string $environment, ?string $baseUrl): string
    {
        if ($baseUrl === null && !isset(self::ENVIRONMENTS[$environment])) {
            throw new ValidationError('Pont: environment must be sandbox or production');
        }
        if ($baseUrl !== null && (!in_array(parse_url($baseUrl, PHP_URL_SCHEME), ['http', 'https'], true) || (string) parse_url($baseUrl, PHP_URL_HOST) === '')) {
            throw new ValidationError('Pont: baseUrl must be an http(s) URL');
        }
        return rtrim($baseUrl ?? self::ENVIRONMENTS[$environment], '/');
    }

    /** The last answer (also after an error): its status, headers and request id. */
    public function lastResponse(): ?Response
    {
        return $this->http->lastResponse;
    }

    /** Closes the kept-alive connection (also done when the object is freed). */
    public function close(): void
    {
        $this->http->close();
    }

    /** @internal for tests: connections opened so far */
    public function connectionsOpened(): int
    {
        return $this->http->connectionsOpened;
    }

    /** @return array<string, string> never the secret or the token */
    public function __debugInfo(): array
    {
        return ['baseUrl' => $this->http->baseUrl];
    }
}
