<?php

declare(strict_types=1);

namespace Pont;

/**
 * The HTTP side: one persistent curl handle (connections kept alive), credentials on every attempt, safe retries
 * and the error mapping.
 *
 * Retries (the same rule in the TypeScript and Python libraries): only a request that is safe to repeat is
 * repeated: GET and HEAD, and any other method when it carries an Idempotency-Key (added to every POST under
 * /api/v1/connect and /api/v1/sdk; the 'idempotency_key' option sets it on any call). It is repeated after no
 * answer (a lost connection, a timeout), 429 and 500/502/503/504, at most 'max_retries' times, after
 * random() * min(maxBackoff, backoff * 2^attempt) seconds (full jitter), or exactly the server's Retry-After when it
 * says one (up to 60 s; a longer one is not waited for: the error is raised with its retryAfter). No attempt starts
 * after the call's deadline, and no attempt's timeout passes it.
 *
 * Cancellation ('cancel' => a callable answering true when the caller wants to stop; an AbortSignal in TypeScript, a
 * threading.Event in Python): it is asked before every attempt, every 50 ms of the wait between attempts, and by
 * curl's progress callback while a transfer is in flight (which is then aborted); the call throws CancelledError.
 *
 * @phpstan-type RequestOptions array{idempotency_key?: string, timeout?: float, deadline?: float, max_retries?: int, headers?: array<string, string>, purpose_of_use?: string, emergency_reason?: string, cancel?: callable(): bool}
 * @phpstan-type Sender callable(string $method, string $url, array<string, string> $headers, ?string $body, float $connectTimeout, float $timeout): array{0: int, 1: array<string, string>, 2: string|resource}
 */
final class Transport
{
    public const VERSION = '0.2.0';
    public const USER_AGENT = 'pont-php/' . self::VERSION;
    public const OPTIONS = ['idempotency_key', 'timeout', 'deadline', 'max_retries', 'headers', 'purpose_of_use', 'emergency_reason', 'cancel'];
    /** Seconds between two questions to the 'cancel' callable while waiting before a retry. */
    private const CANCEL_SLICE = 0.05;
    private const RETRY_STATUSES = [429, 500, 502, 503, 504];
    private const SAFE_METHODS = ['GET', 'HEAD'];

    /** @var \CurlHandle|null the one handle: curl keeps its connections open between requests */
    private ?\CurlHandle $curl = null;
    /** @var callable */
    private $sender;
    /** @var callable(float): void */
    private $sleep;
    /** Whether $sleep is the real one (not a test's): only then is the wait cut in slices to ask 'cancel'. */
    private bool $realSleep;
    /** @var callable(): float */
    private $clock;
    /** @var callable(): float */
    private $random;
    /** @var callable(): float */
    private $wallClock;
    /** @var null|callable(bool): array<string, string> credentials of one attempt (true: a fresh token) */
    public $credentials = null;
    /** False for credentials that cannot be renewed (a patient's token): no second try after a 401. */
    public bool $renewableCredentials = true;
    /** What the last answer was: its status, headers and request id (also after an error). */
    public ?Response $lastResponse = null;
    /** Connections curl opened so far (tests check reuse). */
    public int $connectionsOpened = 0;
    /** Whether the request being sent may be repeated, and whether its answer is streamed (see curlSend). */
    private bool $repeatable = true;
    private bool $stream = false;
    /** @var null|callable(): bool the 'cancel' option of the request being sent (see curlSend) */
    private $cancel = null;

    /**
     * @param null|callable $sender for tests: (method, url, headers, body, connectTimeout, timeout) -> [status, lower-cased headers, body];
     *        throws NetworkError (or TimeoutError) when no answer came
     * @param null|callable(array<string, mixed>): void $onRequest  ['method', 'url', 'headers' (secrets masked), 'attempt']
     * @param null|callable(array<string, mixed>): void $onResponse ['method', 'url', 'status', 'headers', 'request_id', 'attempt', 'elapsed', 'error']
     */
    public function __construct(
        public readonly string $baseUrl,
        public readonly int $maxRetries = 3,
        public readonly float $timeout = 30.0,
        public readonly float $connectTimeout = 10.0,
        public readonly float $deadline = 120.0,
        public readonly float $backoff = 0.5,
        public readonly float $maxBackoff = 8.0,
        ?callable $sender = null,
        ?callable $sleep = null,
        ?callable $clock = null,
        ?callable $random = null,
        ?callable $wallClock = null,
        private readonly mixed $onRequest = null,
        private readonly mixed $onResponse = null,
    ) {
        $this->sender = $sender ?? $this->curlSend(...);
        $this->realSleep = $sleep === null;
        $this->sleep = $sleep ?? static fn (float $s) => usleep((int) round($s * 1_000_000));
        $this->clock = $clock ?? static fn (): float => hrtime(true) / 1e9;
        $this->random = $random ?? static fn (): float => mt_rand() / (mt_getrandmax() + 1);
        $this->wallClock = $wallClock ?? static fn (): float => microtime(true);
    }

    /** @param array<string, mixed> $query a list value repeats the parameter */
    public function url(string $path, array $query = []): string
    {
        $pairs = [];
        foreach ($query as $name => $value) {
            foreach (is_array($value) ? $value : [$value] as $item) {
                if ($item !== null) {
                    $pairs[] = rawurlencode((string) $name) . '=' . rawurlencode(is_bool($item) ? ($item ? 'true' : 'false') : (string) $item);
                }
            }
        }
        return $this->baseUrl . $path . ($pairs === [] ? '' : '?' . implode('&', $pairs));
    }

    /** A link the server gave (a next page): its path and query on our base URL, so credentials never leave it. */
    public function sameOrigin(string $link): string
    {
        $parts = parse_url($link);
        $basePath = (string) (parse_url($this->baseUrl, PHP_URL_PATH) ?? '');
        $path = (string) ($parts['path'] ?? '');
        $base = substr($this->baseUrl, 0, strlen($this->baseUrl) - strlen($basePath));
        return $base . (str_starts_with($path, $basePath) ? $path : $basePath . $path) . (isset($parts['query']) ? '?' . $parts['query'] : '');
    }

    /**
     * One call. $create adds an Idempotency-Key (unless the options give one). $repeatable overrides the method's rule
     * when no key is sent: true for a POST with no effect (the token, introspection, a search), false for a GET that
     * starts a job. $stream: a 2xx answer's body is a stream resource (a temporary file, read by the caller).
     *
     * @param array<string, mixed> $query
     * @param array<string, mixed> $options RequestOptions
     */
    public function request(string $method, string $path, array $query = [], mixed $body = null, bool $create = false, array $options = [],
        ?string $url = null, bool $auth = true, string $accept = 'application/json', string $contentType = 'application/json',
        ?bool $repeatable = null, ?string $rawBody = null, bool $stream = false): mixed
    {
        $unknown = array_diff(array_keys($options), self::OPTIONS);
        if ($unknown !== []) {
            throw new ValidationError('unknown option(s): ' . implode(', ', $unknown));
        }
        if (isset($options['cancel']) && !is_callable($options['cancel'])) {
            throw new ValidationError('cancel must be a callable answering true to cancel the call');
        }
        $headers = ['Accept' => $accept, 'User-Agent' => self::USER_AGENT];
        $data = $rawBody ?? ($body === null ? null : json_encode($body, JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE));
        if ($data !== null) {
            $headers['Content-Type'] = $contentType;
        }
        $key = $options['idempotency_key'] ?? ($create ? self::uuid() : null);
        $named = ['Idempotency-Key' => $key, 'X-Purpose-Of-Use' => $options['purpose_of_use'] ?? null, 'X-Emergency-Reason' => $options['emergency_reason'] ?? null];
        foreach ($named + ($options['headers'] ?? []) as $name => $value) {
            if ($value !== null && $value !== '') {
                $headers[$name] = self::headerValue((string) $name, (string) $value);
            }
        }
        $method = strtoupper($method);
        $retryable = $key !== null || ($repeatable ?? in_array($method, self::SAFE_METHODS, true));
        return $this->send($method, $url ?? $this->url($path, $query), $headers, $data, $retryable, $auth, $options, $stream);
    }

    /**
     * @param array<string, string> $headers
     * @param array<string, mixed> $options
     */
    private function send(string $method, string $url, array $headers, ?string $data, bool $retryable, bool $auth, array $options, bool $stream): mixed
    {
        $maxRetries = (int) ($options['max_retries'] ?? $this->maxRetries);
        $timeout = (float) ($options['timeout'] ?? $this->timeout);
        $deadline = ($this->clock)() + (float) ($options['deadline'] ?? $this->deadline);
        $cancel = $options['cancel'] ?? null;
        $refreshed = false;
        for ($attempt = 0; ; $attempt++) {
            self::unlessCancelled($cancel, $method, $url, $attempt);
            $sent = $headers;
            if ($auth && $this->credentials !== null) {
                $sent += ($this->credentials)(false);
                self::unlessCancelled($cancel, $method, $url, $attempt); // fetching a token took time
            }
            $remaining = $deadline - ($this->clock)();
            if ($remaining <= 0) {
                throw new TimeoutError("$method " . self::path($url) . ": no answer within the deadline ($attempt attempts)");
            }
            if ($this->onRequest !== null) {
                ($this->onRequest)(['method' => $method, 'url' => $url, 'headers' => self::masked($sent), 'attempt' => $attempt]);
            }
            $started = ($this->clock)();
            $status = null;
            $resHeaders = [];
            $this->repeatable = $retryable; // here: fetching a token above sent a request of its own
            $this->stream = $stream;
            $this->cancel = $cancel;
            try {
                [$status, $resHeaders, $raw] = ($this->sender)($method, $url, $sent, $data, min($this->connectTimeout, $remaining), min($timeout, $remaining));
                [$error, $result] = self::outcome($status, $resHeaders, $raw, $stream);
            } catch (NetworkError|CancelledError $e) {
                // Aborted by the progress callback, or failed while the caller was cancelling anyway.
                $error = $e instanceof CancelledError || ($cancel !== null && $cancel())
                    ? new CancelledError("$method " . self::path($url) . ": cancelled during attempt $attempt; the request may have taken effect")
                    : $e;
                $result = null;
            } finally {
                $this->cancel = null;
            }
            $this->lastResponse = new Response($status, $resHeaders);
            if ($this->onResponse !== null) {
                ($this->onResponse)(['method' => $method, 'url' => $url, 'status' => $status, 'headers' => $resHeaders, 'request_id' => $resHeaders['x-request-id'] ?? null,
                    'attempt' => $attempt, 'elapsed' => ($this->clock)() - $started, 'error' => $error]);
            }
            if ($error === null) {
                return $result;
            }
            if ($error instanceof CancelledError) {
                throw $error;
            }
            if ($status === 401 && $auth && $this->credentials !== null && $this->renewableCredentials && !$refreshed) {
                $refreshed = true;
                $attempt--; // a 401 had no effect: a new token and once more, not counted as a retry
                ($this->credentials)(true);
                continue;
            }
            $delay = $retryable && $attempt < $maxRetries && ($status === null || in_array($status, self::RETRY_STATUSES, true))
                ? $this->delay($attempt, $error, $resHeaders) : null;
            if ($delay === null || ($this->clock)() + $delay >= $deadline) {
                throw $error;
            }
            $this->wait($delay, $cancel);
        }
    }

    /**
     * The wait before a retry: with a 'cancel' callable and the real sleep, in slices of 50 ms, asking it after each
     * (the next turn of the loop then throws); a test's sleep is called as it is.
     *
     * @param null|callable(): bool $cancel
     */
    private function wait(float $seconds, ?callable $cancel): void
    {
        if ($cancel === null || !$this->realSleep) {
            ($this->sleep)($seconds);
            return;
        }
        $until = hrtime(true) / 1e9 + $seconds;
        while (!$cancel() && ($left = $until - hrtime(true) / 1e9) > 0) {
            usleep((int) ceil(min(self::CANCEL_SLICE, $left) * 1_000_000));
        }
    }

    /** @param null|callable(): bool $cancel */
    private static function unlessCancelled(?callable $cancel, string $method, string $url, int $attempt): void
    {
        if ($cancel !== null && $cancel()) {
            throw new CancelledError("$method " . self::path($url) . ": cancelled before attempt $attempt");
        }
    }

    /**
     * Seconds before retry $attempt + 1, or null when the server asks for a longer wait than is honoured.
     *
     * @param array<string, string> $headers
     */
    public function delay(int $attempt, PontError $error, array $headers): ?float
    {
        $retryAfter = $error instanceof RateLimitError ? $error->retryAfter : PontError::retryAfter(null, $headers, ($this->wallClock)());
        if ($retryAfter !== null) {
            return $retryAfter <= PontError::MAX_RETRY_AFTER ? $retryAfter : null;
        }
        return ($this->random)() * min($this->maxBackoff, $this->backoff * (2 ** $attempt));
    }

    /**
     * [the error, null] or [null, the answer].
     *
     * @param array<string, string> $headers
     * @return array{0: ?PontError, 1: mixed}
     */
    private static function outcome(int $status, array $headers, mixed $raw, bool $stream): array
    {
        if ($stream && $status >= 200 && $status < 300) {
            if (is_string($raw)) { // a sender that answered a string (tests)
                $file = fopen('php://temp', 'w+b');
                fwrite($file, $raw);
                rewind($file);
                $raw = $file;
            }
            return [null, $raw];
        }
        $raw = is_resource($raw) ? (string) stream_get_contents($raw, -1, 0) : $raw;
        $parsed = $raw === '' ? null : json_decode($raw, true);
        $isJson = $raw === '' || json_last_error() === JSON_ERROR_NONE;
        if ($status < 200 || $status >= 300) {
            return [PontError::fromResponse($status, $isJson ? $parsed : $raw, $headers), null];
        }
        if (!$isJson) {
            return [new ServerError("HTTP $status: the answer is not JSON", $status, null, $headers['x-request-id'] ?? null, $raw, $headers), null];
        }
        return [null, $parsed ?? []];
    }

    private static function headerValue(string $name, string $value): string
    {
        if (preg_match('/[\r\n]/', $name . $value) === 1) {
            throw new ValidationError("header $name: line breaks are not allowed");
        }
        return $value;
    }

    /** @param array<string, string> $headers @return array<string, string> */
    private static function masked(array $headers): array
    {
        foreach ($headers as $name => $value) {
            if (in_array(strtolower($name), ['authorization', 'x-bridge-agent-key'], true)) {
                $headers[$name] = '***';
            }
        }
        return $headers;
    }

    private static function path(string $url): string
    {
        return (string) parse_url($url, PHP_URL_PATH);
    }

    private static function uuid(): string
    {
        $b = random_bytes(16);
        $b[6] = chr((ord($b[6]) & 0x0f) | 0x40);
        $b[8] = chr((ord($b[8]) & 0x3f) | 0x80);
        return vsprintf('%s%s-%s-%s-%s-%s%s%s', str_split(bin2hex($b), 4));
    }

    /**
     * The real sender: the one curl handle, reset between requests (curl_reset keeps its open connections).
     * libcurl silently sends a request again when a reused connection dies before any answer, which is also what a
     * lost answer looks like: a request that may not be repeated goes on a fresh connection, where it never does.
     *
     * @param array<string, string> $headers
     * @return array{0: int, 1: array<string, string>, 2: string}
     */
    private function curlSend(string $method, string $url, array $headers, ?string $body, float $connectTimeout, float $timeout): array
    {
        $this->curl ??= curl_init();
        curl_reset($this->curl);
        $resHeaders = [];
        curl_setopt_array($this->curl, [
            CURLOPT_URL => $url,
            CURLOPT_CUSTOMREQUEST => $method,
            CURLOPT_FRESH_CONNECT => !$this->repeatable,
            CURLOPT_NOBODY => $method === 'HEAD',
            CURLOPT_RETURNTRANSFER => true,
            CURLOPT_CONNECTTIMEOUT_MS => max(1, (int) ($connectTimeout * 1000)),
            CURLOPT_TIMEOUT_MS => max(1, (int) ($timeout * 1000)),
            CURLOPT_HTTPHEADER => array_map(static fn ($k, $v) => "$k: $v", array_keys($headers), $headers),
            CURLOPT_HEADERFUNCTION => static function ($c, string $line) use (&$resHeaders): int {
                $parts = explode(':', $line, 2);
                if (count($parts) === 2) {
                    $resHeaders[strtolower(trim($parts[0]))] = trim($parts[1]);
                }
                return strlen($line);
            },
        ]);
        if ($body !== null) {
            curl_setopt($this->curl, CURLOPT_POSTFIELDS, $body);
        }
        if ($this->cancel !== null) { // curl asks it many times a second, also while waiting; curl_reset removes it
            $cancel = $this->cancel;
            curl_setopt_array($this->curl, [
                CURLOPT_NOPROGRESS => false,
                // XFERINFOFUNCTION from PHP 8.2; PROGRESSFUNCTION (the same arguments in PHP) before.
                defined('CURLOPT_XFERINFOFUNCTION') ? CURLOPT_XFERINFOFUNCTION : CURLOPT_PROGRESSFUNCTION => static fn ($c, $downTotal, $down, $upTotal, $up): int => $cancel() ? 1 : 0,
            ]);
        }
        $file = null;
        if ($this->stream) { // the body goes to a temporary file (in memory up to 2 MB), never into one string
            $file = fopen('php://temp', 'w+b');
            curl_setopt($this->curl, CURLOPT_FILE, $file);
        }
        $raw = curl_exec($this->curl);
        $this->connectionsOpened += (int) curl_getinfo($this->curl, CURLINFO_NUM_CONNECTS);
        if ($raw === false) {
            if (curl_errno($this->curl) === CURLE_ABORTED_BY_CALLBACK) { // libcurl closes the connection of an aborted transfer
                throw new CancelledError("$method " . self::path($url) . ': cancelled');
            }
            $message = "$method " . self::path($url) . ': no answer (' . curl_error($this->curl) . ')';
            throw curl_errno($this->curl) === CURLE_OPERATION_TIMEDOUT ? new TimeoutError($message) : new NetworkError($message);
        }
        if ($file !== null) {
            rewind($file);
            $raw = $file;
        }
        return [(int) curl_getinfo($this->curl, CURLINFO_RESPONSE_CODE), $resHeaders, is_resource($raw) ? $raw : (string) $raw];
    }

    /** Closes the kept-alive connections. */
    public function close(): void
    {
        if ($this->curl !== null) {
            curl_close($this->curl);
            $this->curl = null;
        }
    }
}
