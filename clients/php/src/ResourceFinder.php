<?php

namespace Stagedrain\Laravel;

use Closure;
use ReflectionReference;
use Serializable;

/**
 * Finds a resource in what serialize() would write for a value.
 *
 * serialize() silently writes a resource (an open file, a socket, a curl
 * handle on PHP 7) as the integer 0, so the worker would get a job that is not
 * the one dispatched. Walking the value the way serialize() does lets the
 * push fail instead, before anything is staged.
 *
 * @internal
 */
final class ResourceFinder
{
    /** Only a guard for PHP 7.3, which cannot see a reference cycle in an array. */
    private const MAX_DEPTH = 512;

    /** @var array<int, object> objects walked, kept alive so their ids stay unique */
    private $objects = [];

    /** @var array<string, true> ids of PHP references (`&`) walked */
    private $references = [];

    /**
     * The path of the first resource in $value ("$job->file", "$job->files[2]"),
     * or null if there is none.
     *
     * @param  mixed  $value
     */
    public static function find($value, string $path): ?string
    {
        return (new self)->walk($value, $path, 0);
    }

    /** @param mixed $value */
    private function walk($value, string $path, int $depth): ?string
    {
        // gettype() says "resource (closed)" for a closed one, which
        // is_resource() would not call a resource; serialize() writes both as 0.
        if (strncmp(gettype($value), 'resource', 8) === 0) {
            return $path;
        }
        if ($depth > self::MAX_DEPTH) {
            return null;
        }
        if (is_array($value)) {
            return $this->walkArray($value, $path, $depth);
        }
        if (is_object($value)) {
            return $this->walkObject($value, $path, $depth);
        }

        return null;
    }

    private function walkArray(array $array, string $path, int $depth): ?string
    {
        foreach ($array as $key => $item) {
            // serialize() writes a value reached twice through one reference
            // once; a cycle through references goes through here.
            if (PHP_VERSION_ID >= 70400 && ($ref = ReflectionReference::fromArrayElement($array, $key))) {
                if (isset($this->references[$ref->getId()])) {
                    continue;
                }
                $this->references[$ref->getId()] = true;
            }
            $found = $this->walk($item, $path.'['.(is_int($key) ? $key : "'".$key."'").']', $depth + 1);
            if ($found !== null) {
                return $found;
            }
        }

        return null;
    }

    /** @param object $object */
    private function walkObject($object, string $path, int $depth): ?string
    {
        $id = spl_object_id($object);
        if (isset($this->objects[$id])) {
            return null; // serialize() writes it once, then a back-reference
        }
        $this->objects[$id] = $object;

        if ($object instanceof Closure) {
            return null; // serialize() refuses a Closure itself, with its own error
        }
        // The same precedence as serialize(): __serialize(), then
        // Serializable (its string is opaque), then __sleep(), then every
        // property, private and protected ones included.
        if (method_exists($object, '__serialize')) {
            return $this->walkProperties($object->__serialize(), $path, $depth);
        }
        if ($object instanceof Serializable) {
            return null;
        }
        $properties = (array) $object;
        if (method_exists($object, '__sleep')) {
            $names = $object->__sleep();
            $properties = is_array($names) ? $this->sleepProperties($object, $properties, $names) : [];
        }

        return $this->walkProperties($properties, $path, $depth);
    }

    private function walkProperties(array $properties, string $path, int $depth): ?string
    {
        foreach ($properties as $key => $value) {
            // (array) names a private property "\0Class\0name" and a protected
            // one "\0*\0name"; the path shows the name.
            $name = is_string($key) && $key !== '' && $key[0] === "\0"
                ? substr($key, strrpos($key, "\0") + 1)
                : $key;
            $found = $this->walk($value, $path.'->'.$name, $depth + 1);
            if ($found !== null) {
                return $found;
            }
        }

        return null;
    }

    /**
     * The properties __sleep() names, looked up as serialize() does: as
     * given, then as the class's private one, then as a protected one.
     *
     * @param  object  $object
     */
    private function sleepProperties($object, array $properties, array $names): array
    {
        $picked = [];
        foreach ($names as $name) {
            $name = (string) $name;
            foreach ([$name, "\0".get_class($object)."\0".$name, "\0*\0".$name] as $key) {
                if (array_key_exists($key, $properties)) {
                    $picked[$key] = $properties[$key];
                    break;
                }
            }
        }

        return $picked;
    }
}
