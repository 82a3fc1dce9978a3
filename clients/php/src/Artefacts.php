<?php

declare(strict_types=1);

namespace Pont;

/**
 * Consent artefacts verified offline (docs/consent-artefacts.md): a compact JWS signed RS256 by Pont's token key,
 * checked with openssl against the key of its `kid` in Pont's key set (GET /.well-known/jwks.json). Needs no client.
 */
final class Artefacts
{
    /**
     * The artefact's payload (`consent` holds the artefact), or ArtefactVerificationError when it is malformed, no RSA
     * key of the set has its kid, the signature does not hold, or `exp` has passed. A valid signature says what was
     * granted: check `consents->revoked` before relying on it.
     *
     * @param array{keys?: list<array<string, mixed>>} $jwks
     * @return array<string, mixed>
     */
    public static function verify(string $jws, array $jwks, ?int $now = null, ?string $issuer = null): array
    {
        $parts = explode('.', $jws);
        if (count($parts) !== 3) {
            throw new ArtefactVerificationError('Not a compact JWS');
        }
        $header = json_decode(self::b64($parts[0]), true);
        $payload = json_decode(self::b64($parts[1]), true);
        if (!is_array($header) || !is_array($payload)) {
            throw new ArtefactVerificationError('The JWS header or payload is not JSON');
        }
        if (($header['alg'] ?? null) !== 'RS256') {
            throw new ArtefactVerificationError('Unexpected alg (consent artefacts are RS256)');
        }
        $key = null;
        foreach ($jwks['keys'] ?? [] as $candidate) {
            if (is_array($candidate) && ($candidate['kid'] ?? null) === ($header['kid'] ?? null) && ($candidate['kty'] ?? null) === 'RSA') {
                $key = $candidate;
                break;
            }
        }
        if ($key === null || !is_string($key['n'] ?? null) || !is_string($key['e'] ?? null)) {
            throw new ArtefactVerificationError('No RSA key ' . json_encode($header['kid'] ?? null) . ' in the key set (rotated out or revoked: fetch the artefact again)');
        }
        $pem = self::pem(self::b64($key['n']), self::b64($key['e']));
        $ok = @openssl_verify($parts[0] . '.' . $parts[1], self::b64($parts[2]), $pem, OPENSSL_ALGO_SHA256);
        if ($ok !== 1) {
            throw new ArtefactVerificationError('The signature does not verify');
        }
        if (!is_array($payload['consent'] ?? null)) {
            throw new ArtefactVerificationError('No consent in the payload');
        }
        $exp = $payload['exp'] ?? null;
        if (is_int($exp) && $exp <= ($now ?? time())) {
            throw new ArtefactVerificationError('The consent has expired (exp)');
        }
        if ($issuer !== null && ($payload['iss'] ?? null) !== $issuer) {
            throw new ArtefactVerificationError('Issued by ' . json_encode($payload['iss'] ?? null) . ', not ' . $issuer);
        }
        return $payload;
    }

    private static function b64(string $part): string
    {
        $decoded = base64_decode(strtr($part, '-_', '+/') . str_repeat('=', (4 - strlen($part) % 4) % 4), true);
        if ($decoded === false) {
            throw new ArtefactVerificationError('The JWS is not base64url');
        }
        return $decoded;
    }

    /** The PEM of an RSA public key (SubjectPublicKeyInfo, DER) from its modulus and exponent. */
    private static function pem(string $n, string $e): string
    {
        $int = static fn (string $bytes): string => self::der(0x02, (ord($bytes[0] ?? "\0") > 0x7f ? "\0" : '') . $bytes);
        $rsaKey = self::der(0x30, $int($n) . $int($e));
        $algorithm = self::der(0x30, self::der(0x06, "\x2a\x86\x48\x86\xf7\x0d\x01\x01\x01") . "\x05\x00");
        $spki = self::der(0x30, $algorithm . self::der(0x03, "\0" . $rsaKey));
        return "-----BEGIN PUBLIC KEY-----\n" . chunk_split(base64_encode($spki), 64, "\n") . "-----END PUBLIC KEY-----\n";
    }

    private static function der(int $tag, string $content): string
    {
        $length = strlen($content);
        if ($length < 0x80) {
            return chr($tag) . chr($length) . $content;
        }
        $bytes = ltrim(pack('N', $length), "\0");
        return chr($tag) . chr(0x80 | strlen($bytes)) . $bytes . $content;
    }
}
