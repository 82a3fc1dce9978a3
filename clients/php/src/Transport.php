<?php

declare(strict_types=1);

namespace Pont;

/** The HTTP side: the token (fetched, cached, refreshed before expiry), retries, and the error mapping. */
final class Transport
{
    public const REFRESH_BEFORE_SECONDS = 60;

    private ?string $token = null;
    private float $tokenExpiresAt = 0.0;
    /** @var callable(string, string, array<string, string>, ?string, float): array{0: int, 1: array<string, string>, 2: string} */
    private $sender;

    /**
     * @param null|callable(string, string, array<string, string>, ?string, float): array{0: int, 1: array<string, string>, 2: string} $sender
     *        (method, url, headers, body, timeout) -> [status, lower-cased headers, body]; throws \RuntimeException on no answer
     */
    public function __construct(
        private readonly string $clientId,
        #[\SensitiveParameter] private string $clientSecret,
        public readonly string $baseUrl,
        private readonly int $maxRetries = 3,
        private readonly float $timeout = 30.0,
        private readonly float $backoff = 0.5,
        ?callable $sender = null,
    ) {
        $this->sender = $sender ?? self::curlSender(...);
    }

    public function clientId(): string
    {
        return $this->clientId;
    }

    /** After a rotation of the client's secret: later tokens are asked for with the new one. */
    public function useClientSecret(#[\SensitiveParameter] string $secret): void
    {
        $this->clientSecret = $secret;
    }

    /** A valid token: the cached one, or a new one. */
    public function accessToken(bool $force = false): string
    {
        if (!$force && $this->token !== null && microtime(true) < $this->tokenExpiresAt - self::REFRESH_BEFORE_SECONDS) {
            return $this->token;
        }
        $answer = $this->send('POST', $this->baseUrl . '/api/v1/connect/auth/token', [
            'grant_type' => 'client_credentials',
            'client_id' => $this->clientId,
            'client_secret' => $this->clientSecret,
        ], null, false);
        if (!is_array($answer) || !is_string($answer['access_token'] ?? null)) {
            throw new AuthenticationError('The token endpoint answered without an access_token');
        }
        $this->token = $answer['access_token'];
        $this->tokenExpiresAt = microtime(true) + (float) ($answer['expires_in'] ?? 3600);
        return $this->token;
    }

    /** @param array<string, mixed> $query */
    public function request(string $method, string $path, array $query = [], mixed $body = null, bool $idempotent = false, ?string $url = null): mixed
    {
        if ($url === null) {
            $url = $this->baseUrl . $path;
            $pairs = array_filter($query, static fn ($v) => $v !== null);
            $pairs = array_map(static fn ($v) => is_bool($v) ? ($v ? 'true' : 'false') : $v, $pairs);
            if ($pairs !== []) {
                $url .= '?' . http_build_query($pairs, '', '&', PHP_QUERY_RFC3986);
            }
        }
        return $this->send($method, $url, $body, $idempotent ? self::uuid() : null, true);
    }

    private function send(string $method, string $url, mixed $body, ?string $idempotencyKey, bool $auth): mixed
    {
        $refreshed = false;
        for ($attempt = 0; ; $attempt++) {
            $headers = ['Accept' => 'application/json'];
            $data = null;
            if ($body !== null) {
                $headers['Content-Type'] = 'application/json';
                $data = json_encode($body, JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE);
            }
            if ($idempotencyKey !== null) {
                $headers['Idempotency-Key'] = $idempotencyKey;
            }
            if ($auth) {
                $headers['Authorization'] = 'Bearer ' . $this->accessToken();
            }
            try {
                [$status, $resHeaders, $raw] = ($this->sender)($method, $url, $headers, $data, $this->timeout);
            } catch (\RuntimeException $e) {
                if ($attempt < $this->maxRetries) {
                    $this->sleep($attempt, null);
                    continue;
                }
                $path = (string) parse_url($url, PHP_URL_PATH);
                throw new ServerError("$method $path: no answer after " . ($attempt + 1) . ' attempts');
            }
            $parsed = $raw === '' ? null : json_decode($raw, true);
            $isJson = $raw === '' || json_last_error() === JSON_ERROR_NONE;
            if ($status >= 200 && $status < 300) {
                if (!$isJson) {
                    throw new ServerError("HTTP $status: the answer is not JSON", $status, null, $resHeaders['x-request-id'] ?? null);
                }
                return $parsed;
            }
            $error = ServiceException::fromResponse($status, $isJson ? $parsed : $raw, $resHeaders);
            if ($status === 401 && $auth && !$refreshed) {
                $refreshed = true;
                $this->accessToken(true);
                continue;
            }
            if (($status === 429 || $status >= 500) && $attempt < $this->maxRetries) {
                $this->sleep($attempt, $error instanceof RateLimitError ? $error->retryAfter : null);
                continue;
            }
            throw $error;
        }
    }

    private function sleep(int $attempt, ?float $retryAfter): void
    {
        $seconds = $retryAfter ?? $this->backoff * (2 ** $attempt) * (0.5 + mt_rand() / mt_getrandmax());
        usleep((int) round($seconds * 1_000_000));
    }

    private static function uuid(): string
    {
        $b = random_bytes(16);
        $b[6] = chr((ord($b[6]) & 0x0f) | 0x40);
        $b[8] = chr((ord($b[8]) & 0x3f) | 0x80);
        return vsprintf('%s%s-%s-%s-%s-%s%s%s', str_split(bin2hex($b), 4));
    }

    /** @param array<string, string> $headers @return array{0: int, 1: array<string, string>, 2: string} */
    private static function curlSender(string $method, string $url, array $headers, ?string $body, float $timeout): array
    {
        $curl = curl_init($url);
        $resHeaders = [];
        curl_setopt_array($curl, [
            CURLOPT_CUSTOMREQUEST => $method,
            CURLOPT_RETURNTRANSFER => true,
            CURLOPT_TIMEOUT_MS => (int) ($timeout * 1000),
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
            curl_setopt($curl, CURLOPT_POSTFIELDS, $body);
        }
        $raw = curl_exec($curl);
        if ($raw === false) {
            $error = curl_error($curl);
            curl_close($curl);
            throw new \RuntimeException($error);
        }
        $status = (int) curl_getinfo($curl, CURLINFO_RESPONSE_CODE);
        curl_close($curl);
        return [$status, $resHeaders, (string) $raw];
    }
}
