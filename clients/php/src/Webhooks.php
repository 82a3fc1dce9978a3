<?php

declare(strict_types=1);

namespace Pont;

/** Webhook helpers (interface section 6.3): usable alone, without a client, a token or the network. */
final class Webhooks
{
    public const DEFAULT_TOLERANCE = 300;

    /**
     * Checks X-Service-Signature (t=<unix>,v1=<hex>) over the raw body bytes, in constant time: true, or
     * WebhookSignatureError for a bad, missing, stale or future signature. $now (Unix seconds) is for tests.
     */
    public static function verifySignature(string $rawBody, ?string $signatureHeader, string $secret, int $tolerance = self::DEFAULT_TOLERANCE, ?int $now = null): bool
    {
        if ($signatureHeader === null || $signatureHeader === '') {
            throw new WebhookSignatureError('Missing X-Service-Signature header');
        }
        $timestamp = null;
        $signatures = [];
        foreach (explode(',', $signatureHeader) as $part) {
            [$key, $value] = array_pad(array_map('trim', explode('=', $part, 2)), 2, '');
            if ($key === 't') {
                $timestamp = $value;
            } elseif ($key === 'v1' && $value !== '') {
                $signatures[] = $value;
            }
        }
        if ($timestamp === null || !ctype_digit($timestamp) || $signatures === []) {
            throw new WebhookSignatureError('Malformed X-Service-Signature header');
        }
        if (abs(($now ?? time()) - (int) $timestamp) > $tolerance) {
            throw new WebhookSignatureError('Signature timestamp outside the tolerance (stale, replayed or from the future)');
        }
        $expected = hash_hmac('sha256', $timestamp . '.' . $rawBody, $secret);
        foreach ($signatures as $signature) {
            if (preg_match('/^[0-9a-f]{64}$/', $signature) === 1 && hash_equals($expected, $signature)) {
                return true;
            }
        }
        throw new WebhookSignatureError('Signature does not match the body');
    }

    /**
     * Verifies, then returns the event envelope (interface section 6.2) as an array.
     *
     * @return array<string, mixed>
     */
    public static function parseEvent(string $rawBody, ?string $signatureHeader, string $secret, int $tolerance = self::DEFAULT_TOLERANCE, ?int $now = null): array
    {
        self::verifySignature($rawBody, $signatureHeader, $secret, $tolerance, $now);
        $event = json_decode($rawBody, true);
        if (!is_array($event)) {
            throw new WebhookSignatureError('The signed body is not JSON');
        }
        return $event;
    }
}
