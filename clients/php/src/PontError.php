<?php

declare(strict_types=1);

namespace Pont;

/**
 * Base of every error a call raises (names shared with the TypeScript and Python libraries,
 * clients/conformance/README.md): status (null when no answer came), error code, message, request id, the body and
 * the headers of the answer.
 */
class PontError extends \RuntimeException
{
    /** A Retry-After longer than this is not waited for: the call gives up and the error carries retryAfter. */
    public const MAX_RETRY_AFTER = 60.0;

    /** @param array<string, string> $headers lower-cased names */
    public function __construct(
        string $message,
        public readonly ?int $status = null,
        public readonly ?string $errorCode = null,
        public readonly ?string $requestId = null,
        public readonly mixed $body = null,
        public readonly array $headers = [],
    ) {
        parent::__construct($message, $status ?? 0);
    }

    /**
     * The exception for an error answer (the rule the TypeScript and Python libraries share, see the vectors).
     *
     * @param array<string, string> $headers lower-cased names
     */
    public static function fromResponse(int $status, mixed $body, array $headers): self
    {
        $requestId = $headers['x-request-id'] ?? null;
        if (!is_array($body)) {
            return new ServerError("HTTP $status: the answer is not JSON", $status, null, $requestId, $body, $headers);
        }
        [$code, $message] = self::codeAndMessage($status, $body);
        $args = [$message, $status, $code, $requestId, $body, $headers];
        return match (true) {
            $status === 401 => new AuthenticationError(...$args),
            $status === 403 && $code === 'CONSENT_REQUIRED' => new ConsentRequiredError(...$args),
            $status === 403 => new AuthorizationError(...$args),
            $status === 404 => new NotFoundError(...$args),
            $status === 409 && $code === 'IDEMPOTENCY_CONFLICT' => new IdempotencyConflictError(...$args),
            $status === 409 => new ConflictError(...$args),
            $status === 412 => new PreconditionFailedError(...$args),
            $status === 413 => new PayloadTooLargeError(...$args),
            $status === 400 || $status === 422 => new ValidationError(...$args),
            $status === 429 => new RateLimitError(...[...$args, self::retryAfter($body, $headers)]),
            $status >= 500 => new ServerError(...$args),
            default => new PontError(...$args),
        };
    }

    /**
     * Seconds to wait: the body's retry_after, else Retry-After (seconds or an HTTP date; a negative one means nothing).
     *
     * @param array<string, string> $headers
     */
    public static function retryAfter(mixed $body, array $headers, ?float $now = null): ?float
    {
        if (is_array($body) && (is_int($body['retry_after'] ?? null) || is_float($body['retry_after'] ?? null))) {
            return (float) $body['retry_after'];
        }
        $value = trim($headers['retry-after'] ?? '');
        if ($value === '') {
            return null;
        }
        if (is_numeric($value)) {
            return (float) $value >= 0 ? (float) $value : null;
        }
        $when = \DateTimeImmutable::createFromFormat(\DateTimeInterface::RFC7231, $value, new \DateTimeZone('UTC'));
        if ($when === false) {
            return null;
        }
        return max(0.0, $when->getTimestamp() - ($now ?? microtime(true)));
    }

    /** @param array<string, mixed> $body @return array{0: ?string, 1: string} */
    private static function codeAndMessage(int $status, array $body): array
    {
        if (($body['resourceType'] ?? null) === 'OperationOutcome') { // FHIR routes: our error_code is in the issue's details
            $issue = $body['issue'][0] ?? [];
            $code = $issue['details']['coding'][0]['code'] ?? null;
            $message = $issue['diagnostics'] ?? $issue['details']['text'] ?? "HTTP $status";
            return [is_string($code) ? $code : null, (string) $message];
        }
        $code = is_string($body['error_code'] ?? null) ? $body['error_code'] : null;
        return [$code, is_string($body['message'] ?? null) ? $body['message'] : "HTTP $status"];
    }
}

// The name before 0.2 (deprecated): declared with the base, so that `catch (ServiceException $e)` matches.
class_alias(PontError::class, ServiceException::class);
