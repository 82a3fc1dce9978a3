<?php

declare(strict_types=1);

namespace Pont;

/**
 * A patient's own app (the /api/v1/mobile routes): the patient's consents and access log, with the patient's pat_
 * token, not an integrator's credentials: new PatientApp(baseUrl: …, token: null). Pair it once with
 * signIn($healthId, $code) (the code an organisation gave the patient in person: $pont->patients->issuePairingCode),
 * or construct it with a stored $token. The constructor makes no request. A pat_ token is not renewed: a 401
 * (expired, signed out) is an AuthenticationError. Writes (sign-in, answers, revocations, sign-out) are not
 * deduplicated by the server: sent once, retried only with the caller's 'idempotency_key'; reads are retried like
 * any GET.
 *
 * @phpstan-import-type AccessLog from Types
 * @phpstan-import-type ConsentStatus from Types
 * @phpstan-import-type MobileTokenResponse from Types
 * @phpstan-import-type MyConsents from Types
 * @phpstan-import-type RequestOptions from Transport
 */
final class PatientApp extends Module
{
    use Paging;

    private ?string $token;

    /** @param array<string, mixed> $settings Transport's: maxRetries, timeout, connectTimeout, deadline, backoff, sender, sleep, clock, random, onRequest, onResponse */
    public function __construct(string $environment = 'sandbox', ?string $baseUrl = null, #[\SensitiveParameter] ?string $token = null, array $settings = [])
    {
        parent::__construct(new Transport(Pont::baseUrlOf($environment, $baseUrl), ...$settings));
        $this->token = $token === '' ? null : $token;
        $this->http->renewableCredentials = false;
        $this->http->credentials = function (bool $force): array {
            if ($this->token === null) {
                throw new ValidationError('PatientApp: no patient token (signIn($healthId, $code) first, or pass $token)');
            }
            return ['Authorization' => 'Bearer ' . $this->token];
        };
    }

    /** Whether the app holds a patient token (it may still have expired or been revoked). */
    public function signedIn(): bool
    {
        return $this->token !== null;
    }

    /**
     * Exchanges a pairing code for a patient token (access_token, pat_…, valid expires_in seconds), which this app
     * uses from then on; store it to construct the app with $token later. A wrong, used or expired code is an
     * AuthenticationError (the code is single use: not retried).
     *
     * @param RequestOptions $options
     * @return MobileTokenResponse
     */
    public function signIn(string $healthId, #[\SensitiveParameter] string $code, array $options = []): array
    {
        self::required('PatientApp->signIn', ['healthId' => $healthId, 'code' => $code]);
        $answer = $this->http->request('POST', '/api/v1/mobile/auth/token', body: ['health_id' => $healthId, 'code' => $code], options: $options, auth: false);
        $this->token = $answer['access_token'];
        return $answer;
    }

    /** The patient's consents and pending requests, newest first ($answer['items'], one page). @param RequestOptions $options @return MyConsents */
    #[Paged]
    public function consents(array $options = []): array
    {
        return $this->listed($this->singleList('/api/v1/mobile/consents', [], 'items', $options));
    }

    /**
     * Approves a pending consent request: the organisation that asked gets access (not one that paired this app:
     * AuthorizationError).
     *
     * @param RequestOptions $options
     * @return ConsentStatus
     */
    public function approveRequest(string $consentRequestId, array $options = [], ?array $approval = null): array
    {
        // $approval may narrow what was asked (hi_types, date_range, expires_at); wider: ValidationError, the request stays pending.
        self::required('PatientApp->approveRequest', ['consentRequestId' => $consentRequestId]);
        return $this->http->request('POST', '/api/v1/mobile/consent-requests/' . self::segment($consentRequestId) . '/approve', body: $approval, options: $options);
    }

    /** Denies a pending consent request (already answered: ConflictError). @param RequestOptions $options @return ConsentStatus */
    public function denyRequest(string $consentRequestId, array $options = []): array
    {
        self::required('PatientApp->denyRequest', ['consentRequestId' => $consentRequestId]);
        return $this->http->request('POST', '/api/v1/mobile/consent-requests/' . self::segment($consentRequestId) . '/deny', options: $options);
    }

    /** Revokes one of the patient's active consents (consent_id of consents(); not active: ConflictError). @param RequestOptions $options @return ConsentStatus */
    public function revokeConsent(string $consentId, array $options = []): array
    {
        self::required('PatientApp->revokeConsent', ['consentId' => $consentId]);
        return $this->http->request('POST', '/api/v1/mobile/consents/' . self::segment($consentId) . '/revoke', options: $options);
    }

    /**
     * Who read or changed which kind of the patient's data, when, why, break-glass or not, newest first: the first
     * page. autoPagingIterator('accessLog', …) yields every entry, following next_cursor.
     *
     * @param array{limit?: int, cursor?: string} $query
     * @param RequestOptions $options
     * @return AccessLog
     */
    #[Paged]
    public function accessLog(array $query = [], array $options = []): array
    {
        return $this->listed($this->cursorList('/api/v1/mobile/access-log', $query, 'items', $options));
    }

    /** Signs the app out: the token stops working, and this app forgets it. @param RequestOptions $options */
    public function signOut(array $options = []): void
    {
        $this->http->request('POST', '/api/v1/mobile/auth/revoke', options: $options);
        $this->token = null;
    }

    /** The last answer (also after an error): its status, headers and request id. */
    public function lastResponse(): ?Response
    {
        return $this->http->lastResponse;
    }

    /** Closes the kept-alive connection. */
    public function close(): void
    {
        $this->http->close();
    }

    /** @return array<string, string> never the token */
    public function __debugInfo(): array
    {
        return ['baseUrl' => $this->http->baseUrl];
    }
}
