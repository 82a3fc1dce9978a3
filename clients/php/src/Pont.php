<?php

declare(strict_types=1);

namespace Pont;

/**
 * Pont's official PHP client (interface section 4.7):
 * $pont = \Pont\Pont::create(['clientId' => '…', 'clientSecret' => '…', 'environment' => 'sandbox']);
 * $pont->healthIds->resolve(['first_name' => 'Ama', …]);
 *
 * Two ways to make one, with the same arguments:
 * - Pont::create([...]) (or Pont::create(clientId: …, clientSecret: …, …)), eager: checks the credentials with one
 *   token request before it returns (a wrong secret or an unknown client: AuthenticationError, at once). The quick
 *   starts use it.
 * - new Pont(clientId: …, clientSecret: …, …), lazy: the constructor makes no request; the first call that needs a
 *   token fetches it (bad credentials: AuthenticationError from that call).
 * Either way the token is cached and refreshed 60 s before expiry. Settings are every call's defaults (each call may override them with its options
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

    /**
     * Eager: a client whose credentials are checked now, with one token request (the token is kept for the calls that
     * follow). A wrong secret or an unknown client throws AuthenticationError here. Takes the constructor's
     * arguments, as one array keyed by their names (Pont::create(['clientId' => …, 'clientSecret' => …,
     * 'environment' => 'sandbox'])) or as the constructor's own named arguments (Pont::create(clientId: …, …)).
     *
     * @param mixed ...$arguments the constructor's: clientId, clientSecret, environment, baseUrl, maxRetries, timeout,
     *     connectTimeout, deadline, backoff, maxBackoff, sender, sleep, clock, random, onRequest, onResponse
     */
    public static function create(#[\SensitiveParameter] mixed ...$arguments): self
    {
        if (count($arguments) === 1 && array_key_exists(0, $arguments) && is_array($arguments[0])) {
            $arguments = $arguments[0];
        }
        $names = array_map(static fn (\ReflectionParameter $p) => $p->getName(), (new \ReflectionMethod(self::class, '__construct'))->getParameters());
        foreach (array_keys($arguments) as $i => $key) {
            if (is_int($key) ? $key !== $i || $key >= count($names) : !in_array($key, $names, true)) {
                throw new ValidationError("Pont::create: unknown argument $key (the constructor's: " . implode(', ', $names) . ')');
            }
        }
        $clientId = $arguments['clientId'] ?? $arguments[0] ?? null;
        $clientSecret = $arguments['clientSecret'] ?? $arguments[1] ?? null;
        if (!is_string($clientId) || $clientId === '' || !is_string($clientSecret) || $clientSecret === '') {
            throw new ValidationError('Pont::create: clientId and clientSecret are required');
        }
        $pont = new self(...$arguments);
        try {
            ($pont->http->credentials)(false);
        } catch (\Throwable $e) {
            $pont->close();
            throw $e;
        }
        return $pont;
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
